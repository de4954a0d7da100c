package ui

import (
	"github.com/fluxdeployer/fluxdeployer/internal/tree"
)

// graph is a picture of a tree three levels deep (a VectorDeployment, its ArtifactDeployments and their Flux
// objects; a Stage, its VectorDeployments and their ArtifactDeployments; an ArtifactDeployment, its Flux objects
// and the workloads they applied), laid out by the server in columns and drawn as SVG, each box coloured by its
// state and linked to its page.
type graph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	X, Y, W, H   int
	TextX, TextY int
	Label, Title string
	Href         string
	State        state
}

type graphEdge struct {
	X1, Y1, X2, Y2 int
}

const (
	boxWidth   = 330
	boxHeight  = 26
	columnGap  = 60
	rowPitch   = 34
	labelChars = 44
	margin     = 4
)

// layoutGraph places root in the first column, its children in the second and theirs in the third, one row per
// grandchild (or per childless child), each parent centred on its children.
func layoutGraph(root *tree.Node) *graph {
	g := &graph{Width: 3*boxWidth + 2*columnGap + 2*margin}
	row := 0
	column := func(c int) int { return margin + c*(boxWidth+columnGap) }
	top := func(r float64) int { return margin + int(r*rowPitch) }
	childIdx := make([]int, 0, len(root.Children))
	for _, child := range root.Children {
		first := row
		var grandIdx []int
		for _, grand := range child.Children {
			grandIdx = append(grandIdx, g.add(grand, column(2), top(float64(row))))
			row++
		}
		if len(child.Children) == 0 {
			row++
		}
		ci := g.add(child, column(1), top(float64(first)+float64(row-first-1)/2))
		for _, gi := range grandIdx {
			g.connect(ci, gi)
		}
		childIdx = append(childIdx, ci)
	}
	rows := max(row, 1)
	ri := g.add(root, column(0), top(float64(rows-1)/2))
	for _, ci := range childIdx {
		g.connect(ri, ci)
	}
	g.Height = top(float64(rows)) + margin
	return g
}

func (g *graph) add(n *tree.Node, x, y int) int {
	label := n.Kind + "/" + n.Name
	if n.Role != "" {
		label = n.Role + ": " + label
	}
	title := label
	if n.Reason != "" {
		title += " " + n.Reason
	}
	if n.Message != "" && n.Ready != "True" {
		title += ": " + n.Message
	}
	if r := []rune(label); len(r) > labelChars {
		label = string(r[:labelChars-1]) + "…"
	}
	st := stateOfReady(n.Ready)
	if n.Status != "" {
		st = workloadState(n.Status)
	}
	g.Nodes = append(g.Nodes, graphNode{X: x, Y: y, W: boxWidth, H: boxHeight, TextX: x + 8, TextY: y + 17, Label: label, Title: title,
		Href: href(n.Kind, n.Namespace, n.Name), State: st})
	return len(g.Nodes) - 1
}

func (g *graph) connect(from, to int) {
	a, b := g.Nodes[from], g.Nodes[to]
	g.Edges = append(g.Edges, graphEdge{X1: a.X + a.W, Y1: a.Y + a.H/2, X2: b.X, Y2: b.Y + b.H/2})
}
