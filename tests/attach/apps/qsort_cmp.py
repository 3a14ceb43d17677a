"""Target for `dump --native`: Python calls libc's qsort through ctypes with a slow Python
comparator, so most of the time the stack is Python (slow_compare) over C (libc's qsort, libffi,
_ctypes) over Python (sort_forever). The test asserts the C frames sit between the two."""
import ctypes
import ctypes.util

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
N = 512


def slow_compare(a, b):
    x = 0
    for i in range(300):
        x += i  # CMP_LINE
    return a[0] - b[0]


def sort_forever():
    compare = CMP(slow_compare)
    arr = (ctypes.c_int * N)()
    while True:
        for i in range(N):
            arr[i] = (i * 7919) % N
        libc.qsort(arr, N, ctypes.sizeof(ctypes.c_int), compare)  # QSORT_LINE


sort_forever()
