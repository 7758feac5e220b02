//! One definition for every enum a peer sends as a string (the benchmark server's
//! `status`, `state`, `type`, `reason_code`; the RTM `action`): the known names map to
//! variants, anything else is kept as `Other(raw text)` so a newer peer never breaks an
//! older client.

/// Defines `pub enum $name<'a> { $variants…, Other(&'a str) }` with `parse`, `as_str`,
/// a crate-internal `from_json` and `Display`, all from one table of names.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $name:ident in $module:literal (example $ex_text:literal => $ex_variant:ident) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum $name<'a> {
            $( #[doc = concat!("`", $text, "`:")] $(#[$vmeta])* $variant, )*
            /// A value this version does not know, kept as its raw (still JSON-escaped) text.
            Other(&'a str),
        }

        impl<'a> $name<'a> {
            /// Every named variant, for tests that walk the whole table.
            #[cfg(test)]
            #[allow(dead_code)]
            pub(crate) const ALL: &'static [$name<'static>] = &[$($name::$variant),*];

            /// Every name, in the order of the variants, as data: `parse` and `from_json`
            /// walk it in a loop instead of one inlined comparison per name (on firmware,
            /// flash). Names only: a name's index is its variant (see `from_index`), so the
            /// table holds no copies of the variants (a word and more each).
            const NAMES: &'static [&'static str] = &[$( $text ),*];

            /// The variant of name `i` of [`NAMES`](Self::NAMES). The chain of comparisons
            /// with constants folds to the variant's tag being the index.
            fn from_index(i: usize) -> Option<Self> {
                let mut n = 0usize;
                $(
                    if i == n {
                        return Some($name::$variant);
                    }
                    n += 1;
                )*
                let _ = n;
                None
            }


            #[doc = concat!(
                "The variant for the server's text; text it does not know becomes `Other`.\n\n",
                "```\nuse benchlink_core::", $module, "::", stringify!($name), ";\n",
                "assert_eq!(", stringify!($name), "::parse(", stringify!($ex_text), "), ",
                stringify!($name), "::", stringify!($ex_variant), ");\n",
                "assert_eq!(", stringify!($name), "::parse(\"from_the_future\"), ",
                stringify!($name), "::Other(\"from_the_future\"));\n```"
            )]
            pub fn parse(text: &'a str) -> Self {
                $crate::text_enum::index_of(Self::NAMES, text)
                    .and_then(Self::from_index)
                    .unwrap_or(Self::Other(text))
            }

            /// Decodes escapes before comparing, so only truly unknown text is `Other`.
            /// Text without escapes (what peers send) is compared as it is: one scan
            /// for a backslash, then a plain comparison per name, mostly of lengths.
            pub(crate) fn from_json(text: crate::json::JsonStr<'a>) -> Self {
                match text.as_plain() {
                    Some(plain) => Self::parse(plain),
                    None => $crate::text_enum::index_of_json(Self::NAMES, text)
                        .and_then(Self::from_index)
                        .unwrap_or(Self::Other(text.as_raw())),
                }
            }

            #[doc = concat!(
                "The text the server writes for this value (what an emulator should send).\n\n",
                "```\nuse benchlink_core::", $module, "::", stringify!($name), ";\n",
                "assert_eq!(", stringify!($name), "::", stringify!($ex_variant), ".as_str(), ",
                stringify!($ex_text), ");\n```"
            )]
            pub fn as_str(&self) -> &'a str {
                // The variant's index into `NAMES`, from a field-less twin of the enum: a
                // `match` of the tags onto themselves, which folds away; a `match` onto the
                // strings would be a jump table with a case of code per name.
                #[allow(non_camel_case_types, clippy::enum_variant_names)]
                enum Index {
                    $( $variant, )*
                }
                let i = match self {
                    Self::Other(text) => return text,
                    $( Self::$variant => Index::$variant as usize, )*
                };
                // Every index is in the table: the "" is never returned.
                Self::NAMES.get(i).copied().unwrap_or_default()
            }
        }

        impl core::fmt::Display for $name<'_> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Where `text` is in `names`: one loop for every enum (not one per enum and caller).
pub(crate) fn index_of(names: &[&str], text: &str) -> Option<usize> {
    names.iter().position(|name| *name == text)
}

/// [`index_of`] for text with escapes, decoded as it is compared.
pub(crate) fn index_of_json(names: &[&str], text: crate::json::JsonStr<'_>) -> Option<usize> {
    names.iter().position(|name| text == *name)
}
