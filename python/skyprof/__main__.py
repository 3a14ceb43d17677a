"""``python -m skyprof run app.py [args...]`` (or ``run -m module [args...]``): starts the agent,
configured from the SW_AGENT_* environment, then runs the application as __main__."""
import os
import runpy
import sys

USAGE = 'usage: python -m skyprof run (script.py | -m module) [args...]'


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != 'run':
        sys.stderr.write(USAGE + '\n')
        return 2
    from skyprof import agent
    agent.start()
    if argv[1] == '-m':
        if len(argv) < 3:
            sys.stderr.write(USAGE + '\n')
            return 2
        sys.argv = [argv[2]] + argv[3:]
        runpy.run_module(argv[2], run_name='__main__', alter_sys=True)
    else:
        path = argv[1]
        sys.argv = [path] + argv[2:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        runpy.run_path(os.path.abspath(path), run_name='__main__')
    return 0


if __name__ == '__main__':
    sys.exit(main())
