//go:build !linux

package engine

// pseudoFS is Linux-only; elsewhere the path rules of checkBackupDir apply.
func pseudoFS(string) string { return "" }
