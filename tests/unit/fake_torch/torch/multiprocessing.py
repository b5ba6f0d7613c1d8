def spawn(fn, args=(), nprocs=1, join=True):
    for rank in range(nprocs):
        fn(rank, *args)
