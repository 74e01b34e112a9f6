package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// generate makes n strings from a fixed seed (math/rand/v2's PCG: the same strings on every Go
// release), mostly by the quantity grammar with its near misses: signs (and doubled signs),
// digits with leading zeros, decimal points, exponents e/E with signs and of every length up to
// beyond int64, binary and decimal suffixes and wrong-case ones, values at the edges of int64
// and uint64, exponents that wrap in apimachinery's int32, strings around the 64-character cap,
// and junk.
//
// Exponents stay within 6 digits except those of the wrap and int64 forms: apimachinery rounds
// every parsed value to 10^-9 with math/big, and a quantity like "1234567890123456789e900000000"
// (more than 18 digits, so its slow path) makes it build a 900-million-digit number.
func generate(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]string, 0, n)
	for len(out) < n {
		var s string
		switch k := r.IntN(100); {
		case k < 4:
			s = junk(r, r.IntN(12))
		case k < 8:
			s = edge(r)
		case k < 12:
			s = wrapped(r)
		case k < 15:
			s = long(r)
		default:
			s = grammar(r)
		}
		if r.IntN(20) == 0 {
			s = mutate(r, s)
		}
		if strings.ContainsRune(s, '\n') || !fastForGo(s) {
			continue // the driver reads one string a line
		}
		out = append(out, s)
	}
	return out
}

func pick(r *rand.Rand, xs ...string) string { return xs[r.IntN(len(xs))] }

func digits(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

// digitCount is mostly short, sometimes up to the 64-character cap.
func digitCount(r *rand.Rand) int {
	switch k := r.IntN(10); {
	case k < 1:
		return 0
	case k < 7:
		return 1 + r.IntN(4)
	case k < 9:
		return 5 + r.IntN(16)
	default:
		return 21 + r.IntN(40)
	}
}

func sign(r *rand.Rand) string {
	switch k := r.IntN(100); {
	case k < 70:
		return ""
	case k < 82:
		return "-"
	case k < 94:
		return "+"
	default:
		return pick(r, "++", "+-", "-+", "--")
	}
}

func number(r *rand.Rand) string {
	intPart := digits(r, digitCount(r))
	if r.IntN(5) == 0 {
		intPart = strings.Repeat("0", 1+r.IntN(6)) + intPart
	}
	switch k := r.IntN(10); {
	case k < 6:
		return intPart
	case k < 9:
		return intPart + "." + digits(r, r.IntN(13))
	default:
		return intPart + "." + digits(r, r.IntN(30)) + pick(r, "", ".", ".5")
	}
}

func exponent(r *rand.Rand) string {
	var n int
	switch k := r.IntN(20); {
	case k < 1:
		n = 0
	case k < 14:
		n = 1 + r.IntN(2)
	case k < 18:
		n = 3 + r.IntN(4) // up to 6 digits: C's clamp (100000) lies inside
	default:
		n = 19 + r.IntN(4) // int64's 19 digits and beyond
	}
	d := digits(r, n)
	if n >= 19 {
		// Past int64 (both refuse), or int64's largest (apimachinery's int32 reads it as -1).
		// Not any 19 digits: most fit in int64 and wrap in int32 to a scale that apimachinery
		// then rounds with math/big for minutes.
		d = pick(r, string(rune('1'+r.IntN(9)))+digits(r, n), "9223372036854775807",
			"9223372036854775808", "-9223372036854775808", "18446744073709551616")
	}
	return pick(r, "e", "E") + pick(r, "", "", "+", "-", "-") + d
}

func suffix(r *rand.Rand) string {
	switch k := r.IntN(100); {
	case k < 20:
		return ""
	case k < 48:
		return pick(r, "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
	case k < 72:
		return pick(r, "n", "u", "m", "k", "M", "G", "T", "P", "E")
	case k < 92:
		return exponent(r)
	default:
		return pick(r, "K", "mi", "KB", "gb", "i", "e", "E+", "e-", "Ki ", " Gi", "EE", "Gi1",
			"kk", "ki", "MI", "Ee3", "e3Ki", "a", "μ", "Ki\x00")
	}
}

func grammar(r *rand.Rand) string {
	return sign(r) + number(r) + suffix(r)
}

// edge: values next to int64's and uint64's limits, in bytes and with suffixes.
func edge(r *rand.Rand) string {
	base := pick(r, "9223372036854775807", "9223372036854775808", "18446744073709551615",
		"18446744073709551616", "8Ei", "16Ei", "15.999999999999999999Ei", "9Ei", "16E",
		"18.446744073709551615E", "18.446744073709551616E", "18446744073709551615000m",
		"18446744073709551615001m", "18446744073709551614.000000001", "9223372036854775807Ki",
		"8589934592Gi", "17179869183.9999999999Gi", "0.000000001", "0.0000000001", "1n",
		"999999999n", "1000000001n", "1e-9", "1e-10", "18446744073709551615e0",
		"1.8446744073709551615e19", "1.8446744073709551616e19", "1e19", "1e20", "16384Pi",
		"16383.99999Pi", "1.5Ei", "0.5Ei")
	if r.IntN(3) == 0 {
		return pick(r, "-", "+") + base
	}
	return base
}

// wrapped: exponents of k*2^32 + j, which apimachinery's int32(exponent) reads as j.
func wrapped(r *rand.Rand) string {
	k := int64(1 + r.IntN(1<<31-2))
	if r.IntN(2) == 0 {
		k = -k
	}
	e := k<<32 + int64(r.IntN(41)-20)
	mant := pick(r, "1", "0", "12", "1.5", "999", "0.001", "-1", "123456789012345678901")
	return mant + pick(r, "e", "E") + strconv.FormatInt(e, 10)
}

// long: numbers around the 64-character cap.
func long(r *rand.Rand) string {
	s := sign(r) + digits(r, 1+r.IntN(3)) + "." + strings.Repeat("0", 50+r.IntN(12)) +
		digits(r, 1+r.IntN(3))
	return s + suffix(r)
}

// junk: bytes a careless hand or a broken template puts there.
func junk(r *rand.Rand, n int) string {
	const alphabet = "0123456789.+-eEinumkKMGTPB \t%$#{}\"'\\/\x00\xff\xc2\xb5"
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// mutate inserts, deletes or replaces one byte.
func mutate(r *rand.Rand, s string) string {
	const alphabet = "0123456789.+-eEiKMGm \t"
	c := string(alphabet[r.IntN(len(alphabet))])
	if s == "" {
		return c
	}
	i := r.IntN(len(s))
	switch r.IntN(3) {
	case 0:
		return s[:i] + c + s[i:]
	case 1:
		return s[:i] + s[i+1:]
	default:
		return s[:i] + c + s[i+1:]
	}
}

// fastForGo refuses a string whose exponent apimachinery would take, after its int32 wrap, as
// more than a million: rounding that to 10^-9 with math/big takes seconds to minutes (one
// mutated 19-digit exponent kept a first version of this program busy for ten minutes).
func fastForGo(s string) bool {
	m := exponentRe.FindStringSubmatch(splitRest(s))
	if m == nil {
		return true
	}
	e, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return true // refused by both
	}
	w := int64(int32(e))
	return w >= -1000000 && w <= 1000000
}
