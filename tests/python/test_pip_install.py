"""`pip install --no-build-isolation ./python` builds and installs a working package (C extension
compiled from ../src with the interpreter's own setuptools; PyPI not used), into a throwaway venv."""
import os
import shutil
import subprocess
import sys

from skp_harness import Results, tempdir

SOURCE = os.environ.get('SKP_SOURCE_DIR', os.path.join(os.path.dirname(__file__), '..', '..'))


def t_pip_install():
    with tempdir() as tmp:
        venv = os.path.join(tmp, 'venv')
        subprocess.check_call([sys.executable, '-m', 'venv', '--system-site-packages', venv])
        py = os.path.join(venv, 'bin', 'python')
        # build from a copy so the source tree gets no build/ folder; point it at the sources
        pkg = os.path.join(tmp, 'python')
        shutil.copytree(os.path.join(SOURCE, 'python'), pkg,
                        ignore=shutil.ignore_patterns('build', '*.egg-info', '__pycache__', '*.so'))
        env = dict(os.environ, SKYPROF_SOURCE_DIR=os.path.abspath(SOURCE))
        for k in ('PYTHONPATH', 'LD_PRELOAD'):
            env.pop(k, None)
        subprocess.check_call([py, '-m', 'pip', 'install', '-q', '--no-build-isolation',
                               '--no-index', pkg], env=env, cwd=tmp)
        out = subprocess.check_output([py, '-c', (
            'import skyprof, skyprof._skyprof as n\n'
            'from skyprof import agent, config\n'
            'config.collector_address = "127.0.0.1:1"\n'
            'assert agent.start()\n'
            'print(skyprof.dump_stack()[-1], n.reader_info()["layout"], skyprof.__file__)\n'
            'agent.stop(flush_ms=0)\n')], env=env, cwd=tmp, text=True)
        assert '<string>.<module>: 5' in out and ' 3.11 ' in out and venv in out, out


if __name__ == '__main__':
    r = Results()
    r.run('pip_install', t_pip_install)
    r.finish()
