// Package suggest finds, for a word a person mistyped, the word they most likely meant: "did you mean".
package suggest

// Closest returns the candidate nearest to word by edit distance (insertions, deletions, substitutions and
// transpositions of adjacent letters), and whether it is near enough to be what was meant: at most a third of the
// word's length, and never more than 3 edits, so that a suggestion is a typo's correction rather than any word at
// all. Ties go to the earlier candidate.
func Closest(word string, candidates []string) (string, bool) {
	best, bestDistance := "", -1
	for _, c := range candidates {
		if d := distance(word, c); bestDistance < 0 || d < bestDistance {
			best, bestDistance = c, d
		}
	}
	limit := min(3, max(1, len([]rune(word))/3))
	return best, bestDistance >= 0 && bestDistance <= limit
}

// distance is the optimal string alignment distance between a and b, by rune.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j].
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
