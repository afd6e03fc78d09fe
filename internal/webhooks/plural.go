package webhooks

import "strconv"

// Plural is "1 event", "2 events": n and its noun, in the plural unless n
// is 1; for the counts a person reads (summaries, errors, reports).
func Plural(n int, one, many string) string {
	if n != 1 {
		one = many
	}
	return strconv.Itoa(n) + " " + one
}

// ConfiguredSecrets names, after "matches", the n secrets a signature was
// tried against: "the configured secret", "any of the 2 configured
// secrets".
func ConfiguredSecrets(n int) string {
	if n == 1 {
		return "the configured secret"
	}
	return "any of the " + strconv.Itoa(n) + " configured secrets"
}
