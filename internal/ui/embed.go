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

// staticFS serves /static/: the view's one stylesheet, one script and its icon (without one, a browser asks for
// /favicon.ico and logs the 404 as an error on every page).
var staticFS fs.FS = staticRoot

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).ParseFS(templateFS, "templates/*.html"))
