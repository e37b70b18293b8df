/*
 * profile_internal.h — what the profile's reader (profile_read.c) and writer (profile.c) share and
 * nothing else uses: the versions a file may name, and the tables of the `steps:` and `pairs:`
 * rows, one field a row, so both sides walk the same fields in the same order.
 */
#ifndef PP_PROFILE_INTERNAL_H
#define PP_PROFILE_INTERNAL_H

#include "profile.h"

#include <stddef.h>

/* `ppsched: profile N`: the version the writer puts in every file, and the oldest one read
 * (version 1 has no stage_overhead_bytes, steps or pairs). */
#define PP_PROFILE_VERSION        2
#define PP_PROFILE_OLDEST_VERSION 1

/* The largest time and size a profile may hold: every number is range-checked, so that none
 * converts out of range later (a size into size_t, a time into a sum of a step). */
#define PP_PROF_MAX_MS         1e9
#define PP_PROF_MAX_MS_TEXT    "a number 0..1e9 (ms)"
#define PP_PROF_MAX_BYTES      1e15
#define PP_PROF_MAX_BYTES_TEXT "a number 0..1e15 (bytes)"
#define PP_PROF_MAX_WHOLE      1e8
#define PP_PROF_MAX_WHOLE_TEXT "a whole number 1..100000000"

/* One field of a row: a whole number into an int, or a number into a double. */
typedef struct row_field {
    const char *name;
    int whole;           /* 1: a whole number 1..most into an int; 0: a number 0..most */
    double most;         /* the largest value allowed */
    const char *allowed; /* the range, for messages */
    size_t off;          /* in the row */
} row_field_t;

typedef struct row_list {
    const char *name; /* the key */
    const row_field_t *fields;
    int n_fields;
    const char *allowed; /* the fields, for messages */
    size_t row_size, rows_off,
        count_off; /* the row struct; the array and its count in the profile */
} row_list_t;

/* steps: [0] and pairs: [1] (profile.c). */
extern const row_list_t profile_row_lists[2];

#endif /* PP_PROFILE_INTERNAL_H */
