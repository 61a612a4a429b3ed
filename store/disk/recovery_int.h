/*
 * recovery_int.h - private to store/disk/: the disk backend's recovery at open (recovery.c), for
 * store_open_disk in disk.c.
 */
#ifndef LANESCHED_RECOVERY_INT_H
#define LANESCHED_RECOVERY_INT_H

#include "store/disk/disk_int.h"

/* Rebuilds d's queues from the index and the segment files (d has its directories open and
 * no queue yet), then flushes. *report (borrowed) receives what was found and done. */
store_status_t disk_recover(disk_t *d, store_recovery_t *report);

#endif
