/* testlib.c - a shared object dlopen()ed by test_stack_native after the symbolizer started,
 * to check that modules loaded later are found. */
__attribute__((visibility("default"), noinline)) int skp_testlib_func(int x);

__attribute__((visibility("default"), noinline)) int skp_testlib_func(int x)
{
    return x * 3 + 1;
}
