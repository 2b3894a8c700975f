/* Memory for what writers fill as they go (shards, trace chunks): regions
 * of 2 MiB, in huge pages where the system gives them (pages.c). No state. */
#ifndef TFD_PAGES_H
#define TFD_PAGES_H
#include "base.h"

#define PAGES_REGION ((size_t)2 << 20)

/* A zeroed region of PAGES_REGION bytes, aligned to its size, or NULL.
 * On a VM a fresh 4 KiB page costs its first writer a fault of several
 * microseconds (the host backs it then); a huge page costs one fault per
 * 2 MiB. populate: fault it in now (the collector, ahead of the writers). */
void *pages_region(int populate) TFD_HIDDEN;

#endif
