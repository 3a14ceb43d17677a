#!/usr/bin/python3
"""Writes the collector target's seeds: one agent call per method, its messages encoded with the
Python stubs of our .proto files (python3-protobuf from Debian).
Run: /usr/bin/python3 tests/fuzz/server/make_seeds.py build/release/pystubs tests/fuzz/server/corpus_collector
The grpc_h2 seeds are the HTTP/2 bytes of these calls:
  SKP_FUZZ_DUMP=tests/fuzz/server/corpus_grpc_h2 build/release/tests/fuzz/server/fuzz_replay_collector \
      <one seed file>    (one file per run: the replay also feeds every prefix; the first dump,
      conv-0000, is the whole conversation)"""
import importlib.util
import os
import struct
import sys

sys.path.insert(0, sys.argv[1])


def stub(folder, name):
    """Loads a stub by path: the stdlib's `profile` and `logging` shadow those folders."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(sys.argv[1], folder, name + '.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = stub('language_agent', 'Tracing_pb2')
M = stub('management', 'Management_pb2')
P = stub('profile', 'Profile_pb2')
PP = stub('profile', 'Pprof_pb2')
A = stub('profile', 'AsyncProfiler_pb2')
C = stub('common', 'Common_pb2')
L = stub('logging', 'Logging_pb2')

METHODS = {  # index in collector.c's kMethods
    'collect': 0, 'collectInSync': 1, 'props': 2, 'keepAlive': 3, 'profCmds': 4, 'finish': 5,
    'snapshot': 6, 'goProfile': 7, 'pprofCmds': 8, 'pprofCollect': 9, 'asyncCmds': 10,
    'asyncCollect': 11, 'logs': 12, 'config': 13, 'compatSnapshot': 14, 'unknown': 15,
}


def seg(sid, n_spans=2, start=1796208570000):
    s = T.SegmentObject(traceId='trace-' + sid, traceSegmentId=sid, service='shop',
                        serviceInstance='i1', isSizeLimited=False)
    for i in range(n_spans):
        s.spans.add(spanId=i, parentSpanId=i - 1, startTime=start + i, endTime=start + 50,
                    operationName='GET:/items' if i == 0 else 'db', peer='db:5432',
                    spanType=T.Entry if i == 0 else T.Exit, spanLayer=T.Http,
                    componentId=1, isError=(i == 1),
                    tags=[C.KeyStringValuePair(key='http.url', value='/items?x=1')])
    return s


def call(name, msgs, flags=0):
    out = bytes([METHODS[name], flags])
    for m in msgs:
        b = m.SerializeToString() if hasattr(m, 'SerializeToString') else m
        out += struct.pack('>H', len(b)) + b
    return out


tiny_pprof = open(os.path.join(os.path.dirname(__file__), '..', 'pprof_decode', 'corpus',
                               'tiny.pb'), 'rb').read()
seeds = {
    'segments': call('collect', [seg('seg-1'), seg('seg-2', 3)]),
    'segments_open': call('collect', [seg('seg-3')], flags=1),
    'in_sync': call('collectInSync', [T.SegmentCollection(segments=[seg('seg-4'), seg('seg-5')])]),
    'props': call('props', [M.InstanceProperties(service='shop', serviceInstance='i1', properties=[
        C.KeyStringValuePair(key='os_name', value='linux'),
        C.KeyStringValuePair(key='language', value='python')])]),
    'keepalive': call('keepAlive', [M.InstancePingPkg(service='shop', serviceInstance='i1')]),
    'prof_cmds': call('profCmds', [P.ProfileTaskCommandQuery(service='shop', serviceInstance='i1',
                                                             lastCommandTime=0)]),
    'finish': call('finish', [P.ProfileTaskFinishReport(service='shop', serviceInstance='i1',
                                                        taskId='1')]),
    'snapshots': call('snapshot', [P.ThreadSnapshot(taskId='1', traceSegmentId='seg-1',
                                                    time=1796208570010 + k, sequence=k,
                                                    stack=P.ThreadStack(codeSignatures=[
                                                        'main', 'handle', 'slow_b:8']))
                                   for k in range(3)]),
    'snapshots_extreme': call('snapshot', [
        P.ThreadSnapshot(taskId='1', traceSegmentId='seg-1', time=-2**63, sequence=0),
        P.ThreadSnapshot(taskId='1', traceSegmentId='seg-1', time=2**63 - 1, sequence=1)]),
    'go_profile': call('goProfile', [P.GoProfileData(taskId='1', payload=tiny_pprof[:40]),
                                     P.GoProfileData(taskId='1', payload=tiny_pprof[40:],
                                                     isLast=True)]),
    'pprof_cmds': call('pprofCmds', [PP.PprofTaskCommandQuery(service='shop', serviceInstance='i1')]),
    'pprof_collect': call('pprofCollect', [
        PP.PprofData(metadata=PP.PprofMetaData(service='shop', serviceInstance='i1', taskId='1',
                                               contentSize=len(tiny_pprof))),
        PP.PprofData(content=tiny_pprof)]),
    'pprof_error': call('pprofCollect', [
        PP.PprofData(metadata=PP.PprofMetaData(service='shop', serviceInstance='i1', taskId='1',
                                               type=PP.PPROF_EXECUTION_TASK_ERROR),
                     errorMessage='no heap here')]),
    'async_cmds': call('asyncCmds', [A.AsyncProfilerTaskCommandQuery(service='shop',
                                                                     serviceInstance='i1')]),
    'async_collect': call('asyncCollect', [
        A.AsyncProfilerData(metaData=A.AsyncProfilerMetaData(service='shop', serviceInstance='i1',
                                                             taskId='1', contentSize=16)),
        A.AsyncProfilerData(content=b'FLR\0' + bytes(12))]),
    'logs': call('logs', [L.LogData(service='shop', serviceInstance='i1', endpoint='GET:/items')]),
    'config': call('config', [b'\x0a\x04shop']),
    'compat_snapshot': call('compatSnapshot', [P.ThreadSnapshot(taskId='x', sequence=1)]),
    'unknown': call('unknown', [b'']),
}
for k, v in seeds.items():
    with open(os.path.join(sys.argv[2], k), 'wb') as f:
        f.write(v)
