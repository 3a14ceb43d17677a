module skyprof.test/pprofburn

go 1.19
