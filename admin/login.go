package admin

import (
	"crypto/subtle"
	"html/template"
	"net/http"
)

// login signs a browser in with the admin token, which it cannot send as
// a header: GET shows a form (or takes ?token= as the form would, for a
// link an admin keeps), POST takes the form. The cookie it sets holds no
// token (cookieValue), is sent to this address alone (SameSite=Strict:
// no other site's page makes the browser send it) and is out of the
// page's scripts' reach (HttpOnly).
func (ru rule) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if ru.token == "" {
		http.Error(w, "no admin token is set (BRAINBOT_ADMIN_TOKEN): there is nothing to sign in with", http.StatusNotFound)
		return
	}
	given := r.FormValue("token")
	if r.Method == http.MethodGet && given == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginPage.Execute(w, nil) // a write error: the client left
		return
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(ru.token)) != 1 {
		http.Error(w, "wrong admin token", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: ru.cookieValue(), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/status", http.StatusSeeOther)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>brainbot: sign in</title></head>
<body><h1>brainbot</h1>
<form method="post" action="/login">
<label>Admin token (BRAINBOT_ADMIN_TOKEN): <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Sign in</button>
</form></body></html>
`))
