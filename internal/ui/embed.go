package ui

import (
	"embed"
	"html/template"
	"io/fs"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticRoot embed.FS

// staticFS serves /static/: the view's one stylesheet and one script.
var staticFS fs.FS = staticRoot

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).ParseFS(templateFS, "templates/*.html"))
