/*
 * resvrule: when a reservation stops counting, written once (core box of ARCHITECTURE.md: the
 * rules reservations.h lists, "When a reservation stops counting"). Every backend (the local
 * ledger, ledger.c; the shared record, record.c and shared.c), the engine (placer.c) and the
 * core (placement.c) ask these functions instead of writing the test out.
 *
 * Why a header of its own in core/ rather than in reservations.h: the core (placement.c) and
 * the backends below reservations.h both need the rules, and the core includes nothing of the
 * cluster box. The functions are the reservations concept's, hence the resv_ prefix.
 *
 * Units: ms on whichever clock the caller's entry is stamped on (the ledger's monotonic now_ms,
 * the record's shared-clock Unix ms): the two arguments are on the same one. Header only, pure,
 * thread-safe.
 */
#ifndef GMG_RESVRULE_H
#define GMG_RESVRULE_H

#include <stdint.h>

/* Rule 1, expiry: 1 when an entry expiring at expires_ms no longer counts at now_ms (it counts
 * up to, not at, its expiry), else 0. */
static inline int resv_expired(uint64_t expires_ms, uint64_t now_ms)
{
	return expires_ms <= now_ms;
}

#endif
