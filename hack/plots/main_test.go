package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSeriesFromBenchOutput: result lines are read by unit, log lines and other benchmarks' lines are skipped,
// and repeated runs (-count) of one size are averaged.
func TestSeriesFromBenchOutput(t *testing.T) {
	out := `goos: linux
BenchmarkConverge/100x10-2   	1	81000000000 ns/op	1000 artifacts	15.0 floor-s	81.0 operator-s	5.4 ratio
BenchmarkConverge/100x10-2   	1	79000000000 ns/op	1000 artifacts	17.0 floor-s	79.0 operator-s	4.6 ratio
BenchmarkConverge/300x10-2   	1	1 ns/op	3000 artifacts	45.0 floor-s
    BenchmarkConverge/300x10: floor 45s
BenchmarkOther-2 	1	1 ns/op	7 widgets
PASS
`
	path := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := parseBench(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 {
		t.Fatalf("%d result lines, want 4: %+v", len(lines), lines)
	}
	operator := series(lines, []string{"artifacts"}, "operator-s")
	if len(operator) != 1 || operator[0].X != 1000 || operator[0].Y != 80 {
		t.Errorf("operator series %v, want [{1000 80}]", operator)
	}
	floor := series(lines, []string{"artifacts"}, "floor-s")
	if len(floor) != 2 || floor[0].Y != 16 || floor[1].X != 3000 {
		t.Errorf("floor series %v, want [{1000 16} {3000 45}]", floor)
	}
}
