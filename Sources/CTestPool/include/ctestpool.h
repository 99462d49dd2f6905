#ifndef CTESTPOOL_H
#define CTESTPOOL_H

/// The number of threads the test process's Swift tasks run on (0 until the first task job).
int ctestpool_threads(void);

#endif
