// Package docs holds eventd's OpenAPI 3.1 description (openapi.yaml) and the tests that keep it valid and complete.
package docs
