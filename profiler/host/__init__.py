"""The host process's resources: memory policy and budget, worker threads, reused buffers.

Owns how the simulator itself uses the machine it runs on (glibc's allocator policy, the host
memory guard, the thread pool, scratch buffers, the value pool, compiled half<->float loops).
Nothing here knows about IPUs. May import: nothing in profiler.
"""
