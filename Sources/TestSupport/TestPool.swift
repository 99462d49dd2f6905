import CTestPool

/// How many threads the test process's Swift tasks have run on so far (Sources/CTestPool: a pool
/// of CALLEND_TEST_THREADS, default 4, in place of the runtime's one per core).
public var testPoolThreads: Int { Int(ctestpool_threads()) }
