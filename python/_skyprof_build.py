"""In-tree PEP 517 build backend: setuptools' own, except that when the `wheel` package is not
installed (the pyenv interpreter here has none, and PyPI is unreachable) it builds the wheel
itself: `setup.py build` into a staging folder, then a plain zip with the dist-info files
(METADATA, WHEEL, RECORD) that PEP 427 requires."""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from setuptools import build_meta as _st

try:
    import wheel  # noqa: F401
    HAVE_WHEEL = True
except ImportError:
    HAVE_WHEEL = False

NAME = 'skyprof'
VERSION = '0.1.0'

get_requires_for_build_sdist = _st.get_requires_for_build_sdist
build_sdist = _st.build_sdist


def get_requires_for_build_wheel(config_settings=None):
    return _st.get_requires_for_build_wheel(config_settings) if HAVE_WHEEL else []


if HAVE_WHEEL:
    prepare_metadata_for_build_wheel = _st.prepare_metadata_for_build_wheel


def _tag():
    impl = 'cp%d%d' % sys.version_info[:2]
    plat = sysconfig.get_platform().replace('-', '_').replace('.', '_')
    return '%s-%s-%s' % (impl, impl, plat)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return '%s,sha256=%s,%d' % (arc, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if HAVE_WHEEL:
        return _st.build_wheel(wheel_directory, config_settings, metadata_directory)
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix='skyprof-build-') as tmp:
        lib = os.path.join(tmp, 'lib')
        subprocess.check_call([sys.executable, 'setup.py', 'build', '--build-lib', lib,
                               '--build-temp', os.path.join(tmp, 'temp')], cwd=here)
        tag = _tag()
        name = '%s-%s-%s.whl' % (NAME, VERSION, tag)
        dist_info = '%s-%s.dist-info' % (NAME, VERSION)
        records = []
        path = os.path.join(wheel_directory, name)
        with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as zf:
            for root, _, files in os.walk(lib):
                for f in sorted(files):
                    full = os.path.join(root, f)
                    arc = os.path.relpath(full, lib).replace(os.sep, '/')
                    with open(full, 'rb') as fh:
                        data = fh.read()
                    zf.writestr(arc, data)
                    records.append(_record_line(arc, data))
            meta = {
                'METADATA': 'Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: On-demand, '
                            'trace-aware profiling for Python (SkyWalking v3 protocol)\n'
                            % (NAME, VERSION),
                'WHEEL': 'Wheel-Version: 1.0\nGenerator: skyprof-build\nRoot-Is-Purelib: false\n'
                         'Tag: %s\n' % tag,
                'top_level.txt': NAME + '\n',
            }
            for fname, text in meta.items():
                arc = '%s/%s' % (dist_info, fname)
                zf.writestr(arc, text)
                records.append(_record_line(arc, text.encode()))
            records.append('%s/RECORD,,' % dist_info)
            zf.writestr('%s/RECORD' % dist_info, '\n'.join(records) + '\n')
        return name
