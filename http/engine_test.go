package http

import (
	"testing"

	"github.com/eventd/eventd/engine"
)

// testEngine opens an engine in a test directory, closed at cleanup, with
// one project and a live secret key, whose ids it returns too.
func testEngine(t testing.TB) (eng *engine.Engine, projectID string, key engine.CreatedKey) {
	t.Helper()
	var err error
	eng, err = engine.Open(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	name := "p"
	proj, err := eng.CreateProject(engine.ProjectInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	key, err = eng.CreateKey(proj.ID, engine.KeyInput{Name: "k", Type: engine.Secret, Environment: engine.Live})
	if err != nil {
		t.Fatal(err)
	}
	return eng, proj.ID, key
}
