/*
 * Error reporting shared by the plugin's parts: every failure is a message in a
 * caller-provided buffer (the SPANK callback logs it once) and a -1 return.
 */
#ifndef SLURMKUBE_JAIL_ERROR_H
#define SLURMKUBE_JAIL_ERROR_H

#include <stddef.h>

/* Format the message into err (errlen bytes, always terminated) and return -1. */
int jail_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
