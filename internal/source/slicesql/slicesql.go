// Package slicesql builds the SQL conditions with which a keyset source
// (source/postgres, source/mysql) reads only one partition's rows of a
// partitioned sync (source.Slicer, docs/guide.md#which-rows-a-partition-reads).
//
// A partition keeps the rows whose identity text hashes to it: FNV-1a 64 of
// the text, mod N (partition.Of). SQL cannot compute that 64-bit product
// (PostgreSQL and MySQL fail on overflow), but the low bits of FNV-1a depend
// only on the low bits of each step: with h' = (h XOR byte) * prime mod
// 2^64, h' mod 2^a = ((h mod 2^a) XOR byte) * (prime mod 2^a) mod 2^a. So
// the conditions compute h mod 2^a, a = the number of trailing zero bits of
// N, in small integers:
//
//   - N a power of two (2, 4, ..., 64): h mod N is the partition itself, and
//     the condition is exact (for a text, up to the longest it hashes);
//   - N = 2^a * odd, a >= 1 (6, 12, ...): h mod 2^a = (k-1) mod 2^a keeps a
//     superset of the partition's rows (one row in 2^a, not one in N);
//   - N odd: nothing narrows the read (Bits says so); read every row.
//
// Every way, the runner still applies partition.Filter, the exact check, so
// which rows belong to which partition is what it always was.
package slicesql

import (
	"math/bits"
	"strconv"
	"strings"
)

// FNV-1a 64's offset basis and prime (hash/fnv).
const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
)

// Bits returns the bits of the hash a condition computes for partition k
// (1-based) of n: mask = 2^a - 1, want = the value partition k's rows have
// in them, exact when they decide the partition (n = 2^a); false when n is
// odd (nothing narrows) or k is out of range.
func Bits(n, k int) (mask, want int, exact, ok bool) {
	if n < 2 || k < 1 || k > n {
		return 0, 0, false, false
	}
	a := bits.TrailingZeros(uint(n))
	if a == 0 {
		return 0, 0, false, false
	}
	a = min(a, 8) // n <= 64 in practice; the byte arithmetic holds to 8 bits
	mask = 1<<a - 1
	return mask, (k - 1) & mask, n == 1<<a, true
}

// Dialect is how a server spells the operators the conditions use.
type Dialect struct {
	// Xor is bitwise exclusive or ("#" in PostgreSQL, "^" in MySQL), Div
	// integer division ("/", "DIV").
	Xor, Div string
}

// Integer is the hash, masked, of the decimal text of the integer column
// ref, its digits taken by arithmetic (no text is built): one branch per
// number of digits (up to digits), and a "-" first for negative numbers
// when signed.
func (d Dialect) Integer(ref string, digits int, signed bool, mask int) string {
	// A digit's byte is '0' (48) + digit; below 2^a only 48's low bits
	// count, none when a <= 4.
	zero := ""
	if c := 48 & mask; c != 0 {
		zero = strconv.Itoa(c) + " + "
	}
	digit := func(l int, neg bool) func(i int) string {
		return func(i int) string {
			e := ref + " % 10"
			if p := l - 1 - i; p > 0 {
				e = "(" + ref + " " + d.Div + " " + pow10(p) + ") % 10"
			}
			if neg {
				// abs of a remainder: a negative number's digits without
				// negating it (the smallest bigint has no positive).
				e = "abs(" + e + ")"
			}
			return "(" + zero + e + ")"
		}
	}
	var sb strings.Builder
	sb.WriteString("CASE")
	for l := 1; l <= digits; l++ {
		if l < digits {
			sb.WriteString(" WHEN " + ref + " < " + pow10(l) + " THEN ")
		} else {
			sb.WriteString(" ELSE ")
		}
		sb.WriteString(d.hash(mask, l, digit(l, false)))
	}
	sb.WriteString(" END")
	if !signed {
		return sb.String()
	}
	pos := sb.String()
	sb.Reset()
	sb.WriteString("CASE WHEN " + ref + " >= 0 THEN " + pos + " ELSE CASE")
	for l := 1; l <= digits; l++ {
		if l < digits {
			sb.WriteString(" WHEN " + ref + " > -" + pow10(l) + " THEN ")
		} else {
			sb.WriteString(" ELSE ")
		}
		dg := digit(l, true)
		sb.WriteString(d.hash(mask, l+1, func(i int) string {
			if i == 0 {
				return "45" // '-'
			}
			return dg(i - 1)
		}))
	}
	sb.WriteString(" END END")
	return sb.String()
}

// Text is the condition that the hash, masked, of a text of length bytes,
// byte i being byteAt(i), is want; texts longer than maxLen pass (the SQL
// holds a branch per length, so it grows with the square of maxLen).
func (d Dialect) Text(length string, byteAt func(i int) string, maxLen, mask, want int) string {
	w := strconv.Itoa(want)
	var sb strings.Builder
	sb.WriteString("CASE " + length)
	for l := 0; l <= maxLen; l++ {
		sb.WriteString(" WHEN " + strconv.Itoa(l) + " THEN " + d.hash(mask, l, byteAt) + " = " + w)
	}
	sb.WriteString(" ELSE 1 = 1 END")
	return sb.String()
}

// hash is FNV-1a 64 mod (mask+1) of the l bytes byteAt(0..l-1), unrolled:
// ((h XOR byte) * prime) mod 2^a per byte.
func (d Dialect) hash(mask, l int, byteAt func(i int) string) string {
	m := strconv.Itoa(mask)
	prime := strconv.FormatUint(fnvPrime&uint64(mask), 10)
	e := strconv.FormatUint(fnvOffset&uint64(mask), 10)
	for i := 0; i < l; i++ {
		e = "(((" + e + ") " + d.Xor + " " + byteAt(i) + ") * " + prime + " & " + m + ")"
	}
	return e
}

func pow10(p int) string { return "1" + strings.Repeat("0", p) }
