/* The process's memory map as the patcher needs it (maps.c). */
#ifndef TFD_MAPS_H
#define TFD_MAPS_H
#include "base.h"

void tfd_maps_load(void) TFD_HIDDEN;                 /* read /proc/self/maps */
int tfd_maps_prot(uintptr_t addr) TFD_HIDDEN;        /* PROT_* of addr, -1 if unmapped */
int tfd_maps_write(void **slot, void *value) TFD_HIDDEN;
/* what reading /proc/self/maps has cost so far, in bytes (the kernel
 * counts them as the process's reads; coverage puts them with the
 * excluded paths) */
int64_t tfd_maps_bytes_read(void) TFD_HIDDEN;

#endif
