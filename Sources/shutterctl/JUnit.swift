// SPDX-License-Identifier: Apache-2.0

import ShutterSys

/// `verify --junit FILE`'s report: one test case, the press awaited. A wrong press or none
/// is a `failure`; a shutterd that could not be reached, or refused, or a usage error, is
/// an `error`: the test could not be run.
enum JUnit {
    /// The report's XML for a test case `name` that took `seconds` and ended with `failure`
    /// (nil: passed), as an `error` when `error` is set.
    static func report(name: String, seconds: Double, failure: String?, error: Bool) -> String {
        let failures = failure != nil && !error ? 1 : 0
        let errors = failure != nil && error ? 1 : 0
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites tests="1" failures="\(failures)" errors="\(errors)">
              <testsuite name="shutterctl verify" tests="1" failures="\(failures)" errors="\(errors)" time="\(seconds)">
                <testcase classname="shutterctl.verify" name="\(escape(name))" time="\(seconds)">

            """
        if let failure { xml += "      <\(error ? "error" : "failure") message=\"\(escape(failure))\"/>\n" }
        xml += "    </testcase>\n  </testsuite>\n</testsuites>\n"
        return xml
    }

    /// Text made safe for an XML attribute.
    static func escape(_ s: String) -> String {
        var r = ""
        for c in s {
            switch c {
            case "&": r += "&amp;"
            case "<": r += "&lt;"
            case ">": r += "&gt;"
            case "\"": r += "&quot;"
            case "'": r += "&apos;"
            default: r.append(c)
            }
        }
        return r
    }
}

/// Writes the report to `path`; false (and why, on stderr) when it could not be written
/// whole.
@MainActor func writeJUnit(_ path: String, name: String, seconds: Double, failure: String?, error: Bool = false)
    -> Bool
{
    do {
        try Sys.writeFile(path, JUnit.report(name: name, seconds: seconds, failure: failure, error: error))
        return true
    } catch {
        say("shutterctl: cannot write the JUnit report \(path): \(error.message)")
        return false
    }
}
