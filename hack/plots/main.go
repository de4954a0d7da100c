// Command plots draws the figures of docs/performance.md from benchmark output (`make plots`):
//
//   - convergence.png: convergence time against the number of artifacts, for the operator and for the API
//     server's floor (a tight client loop), from `go test -bench` lines reporting the metrics artifacts,
//     operator-s and floor-s (data/bench-converge.txt);
//   - rss.png: peak RSS against the number of ArtifactDeployments, from lines reporting rss-MiB and
//     artifacts (ArtifactDeployments; also artifactdeployments or ads), and the anonymous memory at the end
//     from those that report rss-anon-MiB too (data/bench-memory.txt);
//   - collisions.png: names until the first collision, observed with the real hash cut short against the birthday
//     formula, from hack/collisions -csv (data/collisions.csv).
//
// A figure whose input is missing is not drawn, and the command says so: no figure without measurements.
// It is a module of its own so that gonum/plot stays out of the operator's dependencies.
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func main() {
	data := flag.String("data", "docs/data", "directory of the benchmark outputs")
	out := flag.String("out", "docs", "directory the PNGs are written to")
	flag.Parse()
	figures := []struct {
		name  string
		input string
		draw  func(input, output string) error
	}{
		{"convergence.png", "bench-converge.txt", drawConvergence},
		{"rss.png", "bench-memory.txt", drawRSS},
		{"collisions.png", "collisions.csv", drawCollisions},
	}
	failed := false
	for _, f := range figures {
		input, output := filepath.Join(*data, f.input), filepath.Join(*out, f.name)
		if _, err := os.Stat(input); err != nil {
			fmt.Printf("%s: not drawn, no %s\n", f.name, input)
			continue
		}
		if err := f.draw(input, output); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f.name, err)
			failed = true
			continue
		}
		fmt.Printf("%s: drawn from %s\n", output, input)
	}
	if failed {
		os.Exit(1)
	}
}

// benchLine is one result line of `go test -bench`: the benchmark's name and its metrics by unit.
type benchLine struct {
	name    string
	metrics map[string]float64
}

// parseBench reads the result lines of `go test -bench` output ("BenchmarkX-2  1  123 ns/op  4.5 unit ...").
func parseBench(path string) ([]benchLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var lines []benchLine
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a log line that starts with the benchmark's name
		}
		l := benchLine{name: fields[0], metrics: map[string]float64{}}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number in %q", path, fields[i], s.Text())
			}
			l.metrics[fields[i+1]] = v
		}
		lines = append(lines, l)
	}
	return lines, s.Err()
}

// series collects (x, y) from the lines reporting both units, sorted by x; several lines of the same x (-count)
// are averaged.
func series(lines []benchLine, xUnits []string, yUnit string) plotter.XYs {
	sums := map[float64][]float64{}
	for _, l := range lines {
		y, ok := l.metrics[yUnit]
		if !ok {
			continue
		}
		for _, xu := range xUnits {
			if x, ok := l.metrics[xu]; ok {
				sums[x] = append(sums[x], y)
				break
			}
		}
	}
	xs := make([]float64, 0, len(sums))
	for x := range sums {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	xys := make(plotter.XYs, 0, len(xs))
	for _, x := range xs {
		var total float64
		for _, y := range sums[x] {
			total += y
		}
		xys = append(xys, plotter.XY{X: x, Y: total / float64(len(sums[x]))})
	}
	return xys
}

func drawConvergence(input, output string) error {
	lines, err := parseBench(input)
	if err != nil {
		return err
	}
	// Landscapes of vectors of 10 artifacts make the curve; a single large vector (1x500) is another shape.
	lines = slices.DeleteFunc(lines, func(l benchLine) bool { return !strings.Contains(l.name, "x10-") })
	p := plot.New()
	p.Title.Text = "Convergence of a landscape from scratch"
	p.X.Label.Text = "artifacts (VectorDeployments × artifacts per vector)"
	p.Y.Label.Text = "seconds"
	n := 0
	for i, s := range []struct{ unit, label string }{{"operator-s", "fluxdeployer"}, {"floor-s", "floor: tight client loop"}} {
		xys := series(lines, []string{"artifacts"}, s.unit)
		if len(xys) == 0 {
			continue
		}
		if err := addLinePoints(p, xys, s.label, i); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no line of %s reports artifacts with operator-s or floor-s", input)
	}
	p.X.Min, p.Y.Min = 0, 0
	return save(p, output)
}

func drawRSS(input, output string) error {
	lines, err := parseBench(input)
	if err != nil {
		return err
	}
	xys := series(lines, []string{"artifactdeployments", "ArtifactDeployments", "ads", "artifacts"}, "rss-MiB")
	if len(xys) == 0 {
		return fmt.Errorf("no line of %s reports rss-MiB with artifactdeployments", input)
	}
	p := plot.New()
	p.Title.Text = "Peak RSS of the operator"
	p.X.Label.Text = "ArtifactDeployments (each with 3 Flux objects) in the cache"
	p.Y.Label.Text = "MiB"
	if err := addLinePoints(p, xys, "peak RSS", 0); err != nil {
		return err
	}
	if anon := series(lines, []string{"artifactdeployments", "ArtifactDeployments", "ads", "artifacts"}, "rss-anon-MiB"); len(anon) > 0 {
		if err := addLinePoints(p, anon, "anonymous memory (RssAnon, without the mapped binary)", 1); err != nil {
			return err
		}
	}
	limit := plotter.NewFunction(func(float64) float64 { return 150 })
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(limit)
	p.Legend.Add("goal: 150 MiB", limit)
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, math.Max(p.Y.Max*1.1, 165)
	return save(p, output)
}

// collisionRow is one hash length of hack/collisions -csv.
type collisionRow struct{ values, mean, stderr, predicted float64 }

func readCollisions(path string) ([]collisionRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(records) < 2 {
		return nil, fmt.Errorf("%s has no rows", path)
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	var rows []collisionRow
	for _, r := range records[1:] {
		var v [4]float64
		for i, name := range []string{"values", "observed_mean", "observed_stderr", "predicted"} {
			j, ok := col[name]
			if !ok {
				return nil, fmt.Errorf("%s: no column %s", path, name)
			}
			if v[i], err = strconv.ParseFloat(r[j], 64); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		rows = append(rows, collisionRow{values: v[0], mean: v[1], stderr: v[2], predicted: v[3]})
	}
	return rows, nil
}

// errPoints are measured means with their standard errors.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func drawCollisions(input, output string) error {
	rows, err := readCollisions(input)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Names until the first collision, real hash cut to 3-6 characters"
	p.X.Label.Text = "hash values N = 36^length"
	p.Y.Label.Text = "names at the first collision"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}

	formula := plotter.NewFunction(func(n float64) float64 { return math.Sqrt(math.Pi / 2 * n) })
	formula.Samples = 200
	formula.Color = color.RGBA{B: 200, A: 255}
	lo, hi := rows[0].values/3, rows[len(rows)-1].values*3
	formula.XMin, formula.XMax = lo, hi
	p.Add(formula)
	p.Legend.Add("birthday formula sqrt(pi/2 · N)", formula)

	pts := errPoints{}
	for _, r := range rows {
		pts.XYs = append(pts.XYs, plotter.XY{X: r.values, Y: r.mean})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{r.stderr, r.stderr})
	}
	scatter, err := plotter.NewScatter(pts.XYs)
	if err != nil {
		return err
	}
	scatter.GlyphStyle.Shape = draw.CircleGlyph{}
	scatter.GlyphStyle.Color = color.RGBA{R: 200, A: 255}
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return err
	}
	p.Add(scatter, bars)
	p.Legend.Add("observed mean ± standard error", scatter)
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.X.Max = lo, hi
	return save(p, output)
}

var palette = []color.Color{color.RGBA{R: 200, A: 255}, color.RGBA{B: 200, A: 255}, color.RGBA{G: 150, A: 255}}

func addLinePoints(p *plot.Plot, xys plotter.XYs, label string, i int) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	line.Color, points.Color = palette[i%len(palette)], palette[i%len(palette)]
	p.Add(line, points)
	p.Legend.Add(label, line, points)
	p.Legend.Top, p.Legend.Left = true, true
	return nil
}

func save(p *plot.Plot, output string) error {
	p.Add(plotter.NewGrid())
	p.Legend.XOffs, p.Legend.YOffs = vg.Centimeter, -vg.Centimeter // inside the axes, clear of the title
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, output)
}
