/* Darshan's record id of a cleaned path (darshan_hash.c). */
#ifndef TFD_DARSHAN_HASH_H
#define TFD_DARSHAN_HASH_H
#include "base.h"

uint64_t tfd_hash64(const unsigned char *key, size_t len) TFD_HIDDEN;

#endif
