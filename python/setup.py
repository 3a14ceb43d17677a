"""Builds the skyprof package with its C extension, compiling the C sources it needs from the
repository (../src: common, wire client, agent core, python stack source) and the protobuf-c code
generated from ../proto with protoc-c. No PyPI: only the interpreter's own setuptools is used.

    pip install --no-build-isolation ./python

Needs: a C11 compiler, Python headers with internal/ (python3.11-dev), protoc-c, libprotobuf-c
and libnghttp2 (headers and shared libraries). Set SKYPROF_SOURCE_DIR when building from a copy
of this folder outside the repository."""
import glob
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get('SKYPROF_SOURCE_DIR', os.path.join(HERE, '..')))


def pkg_config(flag, *pkgs):
    try:
        out = subprocess.check_output(['pkg-config', flag] + list(pkgs), text=True)
        return out.split()
    except (OSError, subprocess.CalledProcessError):
        return []


class BuildExt(build_ext):
    """Generates the protobuf-c sources before compiling."""

    def build_extensions(self):
        gen = os.path.join(os.path.abspath(self.build_temp), 'gen')
        os.makedirs(gen, exist_ok=True)
        proto_dir = os.path.join(ROOT, 'proto')
        protos = sorted(os.path.relpath(p, proto_dir)
                        for p in glob.glob(os.path.join(proto_dir, '**', '*.proto'), recursive=True))
        subprocess.check_call(['protoc-c', '--c_out=' + gen, '-I' + proto_dir] + protos,
                              cwd=proto_dir)
        generated = [os.path.join(gen, p[:-len('.proto')] + '.pb-c.c') for p in protos]
        for ext in self.extensions:
            ext.sources = list(ext.sources) + generated
            ext.include_dirs.append(gen)
        super().build_extensions()


def agent_core_sources(src):
    """File names of src/agent/core_sources.txt (one per line, '#' starts a comment line)."""
    with open(os.path.join(src, 'agent', 'core_sources.txt')) as f:
        lines = (line.strip() for line in f)
        return [line for line in lines if line and not line.startswith('#')]


def sources():
    src = os.path.join(ROOT, 'src')
    files = []
    files += sorted(glob.glob(os.path.join(src, 'common', '*.c')))
    files += [os.path.join(src, 'wire', 'grpc_frame.c'), os.path.join(src, 'wire', 'grpc_client.c'),
              os.path.join(src, 'wire', 'pprof_encode.c')]
    # the agent core (the list CMake reads too) without the native (C/C++) stack source, which
    # lives in src/agent/native: Python processes use the Python one
    files += [os.path.join(src, 'agent', name) for name in agent_core_sources(src)]
    files.append(os.path.join(src, 'agent', 'no_default_source.c'))
    files += sorted(glob.glob(os.path.join(src, 'python', '*.c')))
    files += sorted(glob.glob(os.path.join(src, 'python', 'compat', '*.c')))
    return [os.path.relpath(f, HERE) if f.startswith(HERE) else f for f in files]


def version():
    return '0.1.0'


ext = Extension(
    'skyprof._skyprof',
    sources=sources(),
    include_dirs=[os.path.join(ROOT, 'src'), os.path.join(ROOT, 'include')],
    define_macros=[('_GNU_SOURCE', None), ('Py_BUILD_CORE_MODULE', None),
                   ('SKP_VERSION', '"%s"' % version())],
    extra_compile_args=['-std=c11', '-fvisibility=hidden', '-fno-omit-frame-pointer',
                        '-Wno-unused-parameter'] + pkg_config('--cflags', 'libprotobuf-c',
                                                              'libnghttp2'),
    extra_link_args=pkg_config('--libs', 'libprotobuf-c', 'libnghttp2') or
    ['-lprotobuf-c', '-lnghttp2'],
    libraries=['pthread', 'z'],
)

if not os.path.isdir(os.path.join(ROOT, 'src', 'agent')):
    sys.exit('skyprof: C sources not found under %s (set SKYPROF_SOURCE_DIR)' % ROOT)

setup(
    name='skyprof',
    version=version(),
    description='On-demand, trace-aware profiling for Python (SkyWalking v3 protocol)',
    packages=['skyprof', 'skyprof.instrument', 'skyprof.bootstrap'],
    ext_modules=[ext],
    cmdclass={'build_ext': BuildExt},
    python_requires='>=3.8',
    entry_points={},
)
