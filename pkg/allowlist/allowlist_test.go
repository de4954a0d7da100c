package allowlist

import "testing"

func TestAllows(t *testing.T) {
	list := Hosts{"registry.example", "127.0.0.1:5000", "[::1]:5000"}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"registry.example", true},
		{"REGISTRY.example", true},
		{"registry.example:443", false}, // an entry allows the spelling it names, not every port
		{"127.0.0.1:5000", true},
		{"127.0.0.1:5001", false},
		{"127.0.0.1", false},
		{"[::1]:5000", true},
		{"registry.example.evil.example", false},
		{"169.254.169.254", false},
		{"", false},
	} {
		if got := list.Allows(tc.host); got != tc.want {
			t.Errorf("Allows(%q) = %t, want %t", tc.host, got, tc.want)
		}
	}
	if !Hosts(nil).Allows("169.254.169.254") {
		t.Error("an empty list allows every host")
	}
}
