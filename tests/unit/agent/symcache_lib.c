/* symcache_lib.c - built twice (SKP_SYMLIB_FUNC = skp_symlib_a / skp_symlib_b) into two shared
 * objects of identical layout, so the second one dlopen()ed after the first was dlclose()d is
 * mapped at the same address: the address-reuse case of test_symcache. */
#ifndef SKP_SYMLIB_FUNC
#error "SKP_SYMLIB_FUNC must name the function"
#endif

__attribute__((visibility("default"), noinline)) int SKP_SYMLIB_FUNC(int x);

__attribute__((visibility("default"), noinline)) int SKP_SYMLIB_FUNC(int x)
{
    return x * 7 + 3;
}
