import CLIKit
import ServeCommand

// callend-serve: `callend serve` in an executable that maps no media library (what `callend
// serve` runs when this file is installed beside it). The options are serve's: --help lists them.
var args = Arguments(Array(CommandLine.arguments.dropFirst()))
do {
    try runServe(&args)
} catch let error as UsageError {
    fail(error, code: .usage)
} catch {
    fail(error, code: .failure)
}
