// uilib.mjs - what a browser test of the web UI needs: child processes whose output is kept
// (and checked for sanitizer reports at the end), condition waits with deadlines, named steps
// counted as passed/failed, skyprofd through the harness, and Chromium via playwright-core from
// web/node_modules (/usr/bin/chromium, never a browser download).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

const env = process.env;
export const need = (k) => { if (!env[k]) { console.error(`missing env ${k}`); process.exit(2); } return env[k]; };
export const HERE = path.dirname(new URL(import.meta.url).pathname);

export function session(name) {
  const OUT = need('SKP_OUT');
  mkdirSync(OUT, { recursive: true });
  const tmp = mkdtempSync(path.join(os.tmpdir(), `skp-${name}-`));
  const procs = [];
  const s = { OUT, tmp, procs, passed: 0, failed: 0, browser: null, userDir: null };

  s.start = (pname, cmd, args, extraEnv, stdin = 'ignore') => {
    const p = spawn(cmd, args, { env: { ...env, ...extraEnv }, stdio: [stdin, 'pipe', 'pipe'] });
    p.out = '';
    p.name = pname;
    p.stdout.on('data', (d) => { p.out += d; });
    p.stderr.on('data', (d) => { p.out += d; });
    procs.push(p);
    return p;
  };

  s.step = async (title, fn) => {
    const t0 = Date.now();
    try {
      await fn();
      s.passed++;
      console.log(`ok   ${title} (${((Date.now() - t0) / 1000).toFixed(2)}s)`);
    } catch (e) {
      s.failed++;
      console.log(`FAIL ${title} (${((Date.now() - t0) / 1000).toFixed(2)}s)\n${e.stack || e}`);
      // What the page showed when the step failed, beside the test's other screenshots.
      const pages = s.browser ? s.browser.pages() : [];
      if (pages.length) {
        const shot = path.join(OUT, `${name}-failed-${s.failed}.png`);
        await pages[pages.length - 1].screenshot({ path: shot }).then(
          () => console.log(`     the page then: ${shot}`), () => {});
      }
    }
  };

  // skyprofd through tests/harness/skp_harness.py; resolves to {grpc, http} ports.
  s.skyprofd = async (...extra) => harnessPorts(s.start(...skyprofdCommand(tmp, ...extra)));

  s.chromium = async (width = 1280, height = 900) => {
    const require = createRequire(path.join(need('SKP_WEB_DIR'), 'package.json'));
    const { chromium } = require('playwright-core');
    s.userDir = mkdtempSync(path.join(os.tmpdir(), `skp-${name}-chromium-`));
    s.browser = await chromium.launchPersistentContext(s.userDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      viewport: { width, height },
    });
    return s.browser;
  };

  // Stops everything, reports sanitizer output, prints the summary and exits.
  s.finish = async () => {
    if (s.browser) await s.browser.close().catch(() => {});
    for (const p of procs.slice().reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        await Promise.race([new Promise((r) => p.once('exit', r)), new Promise((r) => setTimeout(r, 15000))]);
        if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
      }
      for (const marker of ['ERROR: AddressSanitizer', 'runtime error:', 'ERROR: LeakSanitizer']) {
        if (p.out.includes(marker)) {
          s.failed++;
          console.log(`FAIL ${p.name}: sanitizer report\n${p.out.slice(-4000)}`);
          break;
        }
      }
    }
    rmSync(tmp, { recursive: true, force: true });
    if (s.userDir) rmSync(s.userDir, { recursive: true, force: true });
    if (s.failed) for (const p of procs) console.log(`---- ${p.name} output (tail) ----\n${p.out.slice(-3000)}`);
    console.log(`${s.passed} passed, ${s.failed} failed`);
    process.exit(s.failed ? 1 : 0);
  };
  return s;
}

export async function waitFor(pred, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = await pred();
      if (v) return v;
    } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? ' (last error: ' + last.message + ')' : ''}`);
}

// The browser tests' skyprofd launcher: the harness's (tests/harness/skp_harness.py skyprofd,
// its start_skyprofd) with its database in dir. Returns start()'s arguments; harnessPorts(proc)
// then resolves to the {grpc, http} ports the harness prints as one JSON line.
export const HARNESS = path.join(HERE, '..', 'harness', 'skp_harness.py');
export function skyprofdCommand(dir, ...extra) {
  return ['skyprofd', env.SKP_PYTHON || '/usr/bin/python3', [HARNESS, 'skyprofd', dir, ...extra], {},
    'pipe'];
}
export function harnessPorts(srv) {
  return waitFor(() => {
    const m = /^(\{"grpc".*\})$/m.exec(srv.out);
    if (srv.exitCode !== null) throw new Error('skyprofd exited:\n' + srv.out);
    return m ? JSON.parse(m[1]) : null;
  }, 90000, 'skyprofd ports from the harness');
}

// The port a child announced as '<label> listening on <host>:<port>' (every process the tests
// start on port 0 does; skp_harness.py listening_port reads the same line).
export function listeningPort(p, label, timeoutMs) {
  const rx = new RegExp(`${label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} listening on [0-9.]+:(\\d+)`);
  return waitFor(() => {
    const m = rx.exec(p.out);
    if (p.exitCode !== null) throw new Error(`${p.name} exited:\n${p.out}`);
    return m ? +m[1] : null;
  }, timeoutMs, `${p.name} port`);
}
