#!/usr/bin/env python3
"""Tests of .ci/module-circles on small crates written to a temporary directory.

Run: python3 .ci/module_circles_test.py
"""
import importlib.machinery
import importlib.util
import io
import os
import tempfile
import textwrap
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_LOADER = importlib.machinery.SourceFileLoader(
    "module_circles", os.path.join(_HERE, "module-circles"))
mc = importlib.util.module_from_spec(importlib.util.spec_from_loader(_LOADER.name, _LOADER))
_LOADER.exec_module(mc)

MANIFEST = '[package]\nname = "c"\nversion = "0.1.0"\nedition = "2021"\n'


class CrateTest(unittest.TestCase):
    """Each test writes one crate `c` (a workspace member) from {path under c/: source}."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = self._tmp.name
        self.addCleanup(self._tmp.cleanup)

    def crate(self, files, manifest=MANIFEST):
        with open(os.path.join(self.root, "Cargo.toml"), "w") as f:
            f.write('[workspace]\nmembers = ["c"]\n')
        for path, text in {"Cargo.toml": manifest, **files}.items():
            full = os.path.join(self.root, "c", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(textwrap.dedent(text))
        return os.path.join(self.root, "c")

    def graph(self, files, **kw):
        """(files, {(from, to): set(names)}, up) with paths relative to the crate dir."""
        crate_dir = self.crate(files, **kw)
        rel = lambda p: os.path.relpath(p, crate_dir)   # noqa: E731
        found, arrows, up = mc.crate_graph(crate_dir)
        return ([rel(f) for f in found],
                {(rel(a), rel(b)): set(names) for (a, b), names in arrows.items()},
                {(rel(a), rel(b)) for a, b in up})

    def circles(self, files, parents_ok=False):
        names, arrows, up = self.graph(files)
        if parents_ok:
            arrows = {ab: n for ab, n in arrows.items() if ab not in up}
        return mc.circles(names, arrows)

    def run_main(self, *argv):
        out = io.StringIO()
        code = mc.main(list(argv), root=self.root, out=out)
        return code, out.getvalue()


class Circles(CrateTest):
    def test_parent_and_child_via_super(self):
        files = {
            "src/lib.rs": """
                mod a;
                pub struct Top;
                fn helper() {}
                pub fn run() { a::work(); }
            """,
            "src/a.rs": """
                use super::Top;
                pub(crate) fn work() -> Top { super::helper(); Top }
            """,
        }
        self.assertEqual(self.circles(files), [["src/a.rs", "src/lib.rs"]])
        _, arrows, up = self.graph(files)
        self.assertEqual(arrows, {("src/a.rs", "src/lib.rs"): {"Top", "helper"},
                                  ("src/lib.rs", "src/a.rs"): {"work"}})
        self.assertEqual(up, {("src/a.rs", "src/lib.rs")})
        self.assertEqual(self.circles(files, parents_ok=True), [])

    def test_folder_module_and_super_super(self):
        files = {
            "src/lib.rs": "mod p;\npub(crate) struct Base;\n",
            "src/p.rs": "mod child;\npub(crate) fn f() { child::g(); }\n",
            "src/p/child.rs": "pub(crate) fn g() { super::f(); let _ = super::super::Base; }\n",
        }
        _, arrows, _ = self.graph(files)
        self.assertEqual(arrows, {("src/p.rs", "src/p/child.rs"): {"g"},
                                  ("src/p/child.rs", "src/p.rs"): {"f"},
                                  ("src/p/child.rs", "src/lib.rs"): {"Base"}})
        self.assertEqual(self.circles(files), [["src/p.rs", "src/p/child.rs"]])

    def test_three_siblings_and_a_chain(self):
        files = {
            "src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\n",
            "src/a.rs": "pub(crate) fn a() { crate::b::b(); }\n",
            "src/b.rs": "use crate::c::c;\npub(crate) fn b() { c(); }\n",
            "src/c.rs": "pub(crate) fn c() { crate::a::a(); crate::d::d(); }\n",
            "src/d.rs": "pub(crate) fn d() {}\n",
        }
        self.assertEqual(self.circles(files), [["src/a.rs", "src/b.rs", "src/c.rs"]])

    def test_tarjan_alone(self):
        arrows = {("a", "b"): {}, ("b", "a"): {}, ("b", "c"): {}, ("c", "d"): {},
                  ("d", "e"): {}, ("e", "c"): {}, ("e", "f"): {}}
        self.assertEqual(mc.circles(list("abcdef"), arrows), [["a", "b"], ["c", "d", "e"]])


class Resolution(CrateTest):
    def test_reexports_are_followed_to_the_definition(self):
        _, arrows, _ = self.graph({
            "src/lib.rs": "mod a;\nmod b;\npub use b::Thing;\n",
            "src/b.rs": "mod inner;\npub use self::inner::Thing;\n",
            "src/b/inner.rs": "pub struct Thing;\n",
            "src/a.rs": "use crate::Thing;\nfn f() { let _ = crate::b::Thing; }\n",
        })
        self.assertEqual(arrows, {("src/a.rs", "src/b/inner.rs"): {"Thing"},
                                  ("src/b.rs", "src/b/inner.rs"): {"Thing"},
                                  ("src/lib.rs", "src/b/inner.rs"): {"Thing"}})

    def test_use_groups_renames_and_module_aliases(self):
        _, arrows, _ = self.graph({
            "src/lib.rs": "mod a;\nmod b;\nmod ddl;\n",
            "src/ddl.rs": "pub(crate) fn create_table() {}\n",
            "src/b.rs": "pub(crate) struct Y;\npub(crate) fn g() {}\n",
            "src/a.rs": """
                use crate::{b::{self as bee, Y as Why}, ddl};
                fn f(_: Why) { ddl::create_table(); bee::g(); }
            """,
        })
        self.assertEqual(arrows, {("src/a.rs", "src/b.rs"): {"b", "Y", "g"},
                                  ("src/a.rs", "src/ddl.rs"): {"ddl", "create_table"}})

    def test_bare_child_paths_globs_and_inline_modules(self):
        _, arrows, _ = self.graph({
            "src/lib.rs": """
                mod ddl;
                mod outer { pub(crate) mod inner { pub(crate) fn deep() {} } }
                fn run() { ddl::create_table(); }
            """,
            "src/ddl.rs": """
                use crate::outer::*;
                pub(crate) fn create_table() { crate::outer::inner::deep(); inner::deep(); }
            """,
        })
        self.assertEqual(arrows, {("src/lib.rs", "src/ddl.rs"): {"create_table"},
                                  ("src/ddl.rs", "src/lib.rs"): {"outer::*", "deep"}})

    def test_path_attribute_and_mod_rs(self):
        found, arrows, _ = self.graph({
            "src/lib.rs": '#[path = "odd_name.rs"]\nmod x;\nmod y;\n',
            "src/odd_name.rs": "pub(crate) fn f() { crate::y::g(); }\n",
            "src/y/mod.rs": "pub(crate) fn g() {}\n",
        })
        self.assertEqual(found, ["src/lib.rs", "src/odd_name.rs", "src/y/mod.rs"])
        self.assertEqual(arrows, {("src/odd_name.rs", "src/y/mod.rs"): {"g"}})

    def test_binary_roots_have_their_own_trees(self):
        names, arrows, _ = self.graph({
            "src/lib.rs": "mod helper;\npub fn shared() {}\n",
            "src/helper.rs": "pub(crate) fn h() {}\n",
            "src/bin/tool/main.rs": "mod helper;\nfn main() { helper::h(); }\nfn shared() {}\n",
            "src/bin/tool/helper.rs": "pub(crate) fn h() { crate::shared(); }\n",
            "src/bin/plain.rs": "fn main() { c::shared(); }\n",
        })
        self.assertEqual(arrows, {
            ("src/bin/tool/main.rs", "src/bin/tool/helper.rs"): {"h"},
            ("src/bin/tool/helper.rs", "src/bin/tool/main.rs"): {"shared"}})
        self.assertIn("src/bin/plain.rs", names)

    def test_other_crates_methods_and_unknown_names_are_no_arrows(self):
        _, arrows, _ = self.graph({
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/b.rs": "pub(crate) use std::collections::HashMap;\npub(crate) fn b() {}\n",
            "src/a.rs": """
                struct S { b: u8 }
                impl S { fn f(&self) -> u8 { self.b; self.b(); x.b::<u8>(); self.b } }
                fn g() { std::fs::read("x"); serde::Serialize; Vec::<u8>::new(); }
                fn h(m: crate::b::HashMap<u8, u8>) {}
            """,
        })
        self.assertEqual(arrows, {})


class NotCode(CrateTest):
    def test_comments_doc_links_strings_and_chars(self):
        files = {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/b.rs": "pub(crate) struct X;\npub(crate) fn y() { crate::a::z(); }\n",
            "src/a.rs": '''
                //! Module docs: [crate::b::X].
                /// Calls [`crate::b::y`] /* not */ and [super::b::X].
                pub(crate) fn z<'a>(s: &'a str) -> &'a str {
                    /* outer /* nested crate::b::y() */ still a comment crate::b::y() */
                    let q = '"'; let e = '\\''; let bq = b'"'; let l: &'static str = "x";
                    let s1 = "crate::b::y() \\" crate::b::X";
                    let s2 = r#"crate::b::y() "quoted" crate::b::X"#;
                    let s3 = r##"a "# still crate::b::y()"##;
                    let s4 = b"crate::b::X"; let s5 = br#"crate::b::X"#;
                    'outer: loop { break 'outer; }
                    s
                }
            ''',
        }
        _, arrows, _ = self.graph(files)
        self.assertEqual(arrows, {("src/b.rs", "src/a.rs"): {"z"}})
        self.assertEqual(self.circles(files), [])

    def test_cfg_test_code_and_files(self):
        files = {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/b.rs": "pub(crate) struct X;\npub(crate) fn y() { crate::a::z(); }\n",
            "src/a.rs": """
                pub(crate) fn z() {}
                #[cfg(test)]
                fn helper() { crate::b::y(); }
                #[cfg(test)]
                use crate::b::X;
                #[cfg(all(test, feature = "slow"))]
                const C: [u8; 2] = [crate::b::N, 0];
                #[cfg(test)]
                mod more;
                #[cfg(test)]
                mod tests {
                    use super::*;
                    use crate::b::{X, y};
                    #[test]
                    fn t() { y(); let _ = X; }
                }
                #[cfg(not(test))]
                pub(crate) fn live() {}
            """,
            "src/a/more.rs": "use crate::b::X;\n",
        }
        names, arrows, _ = self.graph(files)
        self.assertNotIn("src/a/more.rs", names)
        self.assertEqual(arrows, {("src/b.rs", "src/a.rs"): {"z"}})
        self.assertEqual(self.circles(files), [])

    def test_tokens(self):
        toks = [t for t, _ in mc.tokenize("a::b /* /* */ x */ r#\"q\"# 'c' 'l r#fn\n//x\nz")]
        self.assertEqual(toks, ["a", "::", "b", 'r#"q"#', "'c'", "'l", "fn", "z"])
        self.assertEqual(mc.tokenize("a\n/*\n\n*/ b")[1], ("b", 4))


class Command(CrateTest):
    def test_exit_codes_and_report(self):
        self.crate({
            "src/lib.rs": "mod a;\npub struct Top;\npub fn run() { a::work(); }\n",
            "src/a.rs": "pub(crate) fn work() { let _ = super::Top; }\n",
        })
        code, out = self.run_main()
        self.assertEqual(code, 1)
        self.assertIn("CIRCLE in c, 2 files: src/a.rs, src/lib.rs", out)
        self.assertIn("  src/a.rs -> src/lib.rs (up): Top", out)
        self.assertIn("  src/lib.rs -> src/a.rs: work", out)
        code, out = self.run_main("--parents-ok")
        self.assertEqual((code, out.strip()),
                         (0, "module-circles: 1 crates, 2 files, 2 arrows, no circle"))
        code, out = self.run_main("--arrows", "c", "--parents-ok")
        self.assertIn("src/lib.rs -> src/a.rs: work (line 3)", out)
        self.assertEqual(self.run_main("--crate", "c")[0], 1)

    def test_workspace_members_with_a_glob(self):
        self.crate({"src/lib.rs": "pub fn f() {}\n"})
        os.makedirs(os.path.join(self.root, "more", "d", "src"))
        with open(os.path.join(self.root, "more", "d", "Cargo.toml"), "w") as f:
            f.write(MANIFEST.replace('"c"', '"d"'))
        with open(os.path.join(self.root, "more", "d", "src", "main.rs"), "w") as f:
            f.write("fn main() {}\n")
        with open(os.path.join(self.root, "Cargo.toml"), "w") as f:
            f.write('[workspace]\nmembers = ["c", "more/*"]\n')
        self.assertEqual(mc.workspace_members(self.root), ["c", "more/d"])
        self.assertEqual(self.run_main()[1].strip(),
                         "module-circles: 2 crates, 2 files, 0 arrows, no circle")


if __name__ == "__main__":
    unittest.main()
