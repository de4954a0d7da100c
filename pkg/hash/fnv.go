// Package hash renders short, deterministic FNV-1a hashes in base36 for use in Kubernetes object names.
//
// The width of the FNV-1a variant follows the requested length: 32 bits for up to 7 characters, 64 bits for up
// to 13 and 128 bits for up to 25, so that every character of the result carries entropy and no longer hash is
// computed than the length can show. The digits are [0-9a-z] with no further substitution: mapping 36 symbols
// onto fewer (e.g. a vowel-free alphabet) is many-to-one and uneven and throws entropy away.
//
// # Collision odds
//
// A hash of length L takes N = min(36^L, 2^bits) values. Among n distinct inputs, the probability that at least
// two share a hash is, by the birthday approximation, p(n) = 1 - exp(-n(n-1)/(2N)). TestCollisionOddsTable
// recomputes every figure below from that formula, so the table cannot drift from the code.
//
//	length   values N     n=1,000      n=10,000     n=100,000    n=1,000,000
//	6        2.177e+09    2.294e-04    2.271e-02    8.994e-01    1.000e+00
//	8        2.821e+12    1.771e-07    1.772e-05    1.771e-03    1.624e-01
//	10       3.656e+15    1.366e-10    1.367e-08    1.368e-06    1.367e-04
//	13       1.845e+19    2.708e-14    2.710e-12    2.710e-10    2.711e-08
//
// fluxdeployer names ArtifactDeployments with 10 characters: a landscape of 100,000 artifacts sees a collision
// with odds of about one in 730,000, and the collision counter (see internal/vectordeployment) recovers from it.
package hash

import (
	"fmt"
	"math/bits"
)

// MaxLength is the longest hash Fnv renders: 128 bits take 25 base36 digits.
const MaxLength = 25

// Fnv returns the FNV-1a hash of content rendered as exactly length base36 characters ([0-9a-z]), left-padded
// with '0' and keeping the last length characters. length must be between 1 and MaxLength.
func Fnv(content string, length int) (string, error) {
	digits, err := fnvDigits(content, length)
	if err != nil {
		return "", err
	}
	return string(digits[:length]), nil
}

// AppendFnv appends the hash Fnv would return for content to dst. It lets callers that assemble a name in a
// buffer avoid an intermediate string.
func AppendFnv(dst, content []byte, length int) ([]byte, error) {
	digits, err := fnvDigits(content, length)
	if err != nil {
		return dst, err
	}
	return append(dst, digits[:length]...), nil
}

// fnvDigits returns the length base36 digits of content's hash, most significant first. It reads a string or a
// byte slice alike, in place: instantiated once for each, without a copy into the other. It returns the digits by
// value and appends to no buffer of the caller's, so that the callers stay small enough to inline and their
// buffers on their stacks.
func fnvDigits[T string | []byte](content T, length int) (digits [MaxLength]byte, err error) {
	var lsd [MaxLength]byte // least significant first
	switch {
	case length < 1 || length > MaxLength:
		return digits, fmt.Errorf("hash length %d out of range [1,%d]", length, MaxLength)
	case length <= 7:
		base36(lsd[:length], 0, uint64(fnv32a(content)))
	case length <= 13:
		base36(lsd[:length], 0, fnv64a(content))
	default:
		hi, lo := fnv128a(content)
		base36(lsd[:length], hi, lo)
	}
	for i := range length {
		digits[i] = lsd[length-1-i]
	}
	return digits, nil
}

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// base36 writes the len(d) least significant base36 digits of the 128-bit value hi:lo into d, least significant
// first; positions beyond the value's own digits become '0'.
func base36(d []byte, hi, lo uint64) {
	for i := range d {
		if hi == 0 { // division by a constant compiles to a multiplication; keep the common path on it
			d[i] = alphabet[lo%36]
			lo /= 36
			continue
		}
		var r uint64
		hi, r = hi/36, hi%36
		lo, r = bits.Div64(r, lo, 36)
		d[i] = alphabet[r]
	}
}

func fnv32a[T string | []byte](s T) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime
	}
	return h
}

func fnv64a[T string | []byte](s T) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// fnv128a multiplies by the 128-bit FNV prime 2^88 + 0x13b as (h * 0x13b) + (h << 88), modulo 2^128.
func fnv128a[T string | []byte](s T) (hi, lo uint64) {
	hi, lo = 0x6c62272e07bb0142, 0x62b821756295c58d
	for i := 0; i < len(s); i++ {
		lo ^= uint64(s[i])
		carry, low := bits.Mul64(lo, 0x13b)
		hi = hi*0x13b + carry + lo<<24
		lo = low
	}
	return hi, lo
}
