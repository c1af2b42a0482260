package engine

import "testing"

// openTestEngine opens an engine in a test directory, closed at cleanup,
// with one project.
func openTestEngine(t *testing.T) (*Engine, Project) {
	t.Helper()
	e, err := Open(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	name := "p"
	proj, err := e.CreateProject(ProjectInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	return e, proj
}

// secretKey creates a live secret key of proj and returns its principal.
func secretKey(t *testing.T, e *Engine, proj Project) *Principal {
	t.Helper()
	key, err := e.CreateKey(proj.ID, KeyInput{Name: "k", Type: Secret, Environment: Live})
	if err != nil {
		t.Fatal(err)
	}
	p := e.Authenticate([]byte(key.Key))
	if p == nil {
		t.Fatal("the new key does not authenticate")
	}
	return p
}
