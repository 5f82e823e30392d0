package artifacts

// FileSHA256 is exported to the tests, which check served files with it.
var FileSHA256 = fileSHA256
