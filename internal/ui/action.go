package ui

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxdeployer/fluxdeployer/internal/gesture"
)

// action carries out a gesture (reconcile, suspend, resume) on the object of the page the form was on, as the
// viewer: only with --actions, only by POST, only from a page of the view (its Origin), only with the view's
// CSRF token. The API server decides, by the viewer's RBAC, whether it happens.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		http.Error(w, "actions are accepted only from the view's own pages", http.StatusForbidden)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
		http.Error(w, "missing or stale form token: reload the page", http.StatusForbidden)
		return
	}
	g, err := gesture.Parse(r.PostFormValue("gesture"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	page := r.PostFormValue("page")
	parts := strings.Split(strings.Trim(page, "/"), "/")
	var obj client.Object
	if len(parts) == 3 {
		for _, res := range resources {
			if k := kindOfPath(parts[0]); k != "" && res.kind == k {
				obj = res.newObject()
			}
		}
	}
	if obj == nil {
		http.Error(w, "page: not an object's page", http.StatusBadRequest)
		return
	}
	obj.SetNamespace(parts[1])
	obj.SetName(parts[2])
	if _, err := gesture.Do(r.Context(), s.writer, obj, g); err != nil {
		code := http.StatusBadGateway
		if status, ok := err.(apierrors.APIStatus); ok && status.Status().Code >= 400 {
			code = int(status.Status().Code)
		}
		http.Error(w, string(g)+": "+err.Error(), code)
		return
	}
	http.Redirect(w, r, (&url.URL{Path: page}).String(), http.StatusSeeOther)
}

// kindOfPath is the kind whose pages live under /path/.
func kindOfPath(path string) string {
	for _, k := range kinds {
		if k.path == path {
			return k.name
		}
	}
	return ""
}
