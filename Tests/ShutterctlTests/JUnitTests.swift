// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import shutterctl

@Suite("verify's JUnit report")
struct JUnitTests {
    @Test("a pass, a failure and an error, with the names and messages escaped")
    func report() {
        let passed = JUnit.report(name: "KEY_ENTER from 'a<b>'", seconds: 1.5, failure: nil, error: false)
        #expect(
            passed == """
                <?xml version="1.0" encoding="UTF-8"?>
                <testsuites tests="1" failures="0" errors="0">
                  <testsuite name="shutterctl verify" tests="1" failures="0" errors="0" time="1.5">
                    <testcase classname="shutterctl.verify" name="KEY_ENTER from &apos;a&lt;b&gt;&apos;" time="1.5">
                    </testcase>
                  </testsuite>
                </testsuites>

                """)
        let failed = JUnit.report(name: "x", seconds: 0, failure: "got \"KEY_A\" & more", error: false)
        #expect(failed.contains("failures=\"1\" errors=\"0\""))
        #expect(failed.contains("      <failure message=\"got &quot;KEY_A&quot; &amp; more\"/>\n"))
        let error = JUnit.report(name: "x", seconds: 0, failure: "cannot connect", error: true)
        #expect(error.contains("failures=\"0\" errors=\"1\""))
        #expect(error.contains("<error message=\"cannot connect\"/>") && !error.contains("<failure"))
    }
}
