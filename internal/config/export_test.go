package config

// Unexported helpers the external tests check directly.
var (
	Suggest = suggest
)

const MaxFileSize = maxFileSize
