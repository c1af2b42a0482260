// Package docs holds eventd's OpenAPI 3.1 description (openapi.yaml), the
// deployment files under deploy/, and the tests that keep them valid.
package docs
