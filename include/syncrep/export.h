/*
 * SR_API marks the functions of the public API.  libsyncrep is built with
 * -fvisibility=hidden, so the shared library exports these and nothing else
 * (`nm -D --defined-only libsyncrep.so`); the static libraries keep every
 * symbol for the tests that need the internals.
 */
#ifndef SYNCREP_EXPORT_H
#define SYNCREP_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SR_API __attribute__((visibility("default")))
#else
#define SR_API
#endif

#endif
