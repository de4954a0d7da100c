package suggest

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"interval", "timeout", "teardownTimeout", "serviceAccountName", "serviceAccountNames", "wait"}
	for _, tc := range []struct {
		word, want string
		near       bool
	}{
		{"intervall", "interval", true},
		{"intreval", "interval", true}, // a transposition is one edit
		{"timout", "timeout", true},
		{"serviceaccountname", "serviceAccountName", true}, // keys are case-sensitive: a case typo is a typo
		{"serviceAccountNam", "serviceAccountName", true},
		{"wiat", "wait", true},
		{"replicas", "", false},
		{"", "", false},
	} {
		got, near := Closest(tc.word, keys)
		if near != tc.near || near && got != tc.want {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.word, got, near, tc.want, tc.near)
		}
	}
	if _, near := Closest("interval", nil); near {
		t.Error("a suggestion from no candidates")
	}
}
