//! The names a function's parameters bind: `self`, plain parameters, and the names inside
//! destructuring patterns (`State(state): State<App>`, `(a, b): (u32, u32)`).

use syn::{FnArg, Ident, Pat, Signature};

/// The parameters' bound names, in order; `self` first for a method.
pub(crate) struct Params {
    /// The `self` token of a method's receiver.
    pub(crate) receiver: Option<syn::token::SelfValue>,
    /// Every name bound by a typed parameter's pattern.
    pub(crate) names: Vec<Ident>,
}

impl Params {
    pub(crate) fn of(sig: &Signature) -> Self {
        let mut params = Self {
            receiver: None,
            names: Vec::new(),
        };
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(receiver) => params.receiver = Some(receiver.self_token),
                FnArg::Typed(typed) => bound_names(&typed.pat, &mut params.names),
            }
        }
        params
    }

    /// The names a pattern binds.
    pub(crate) fn bound_by(pat: &Pat) -> Vec<Ident> {
        let mut names = Vec::new();
        bound_names(pat, &mut names);
        names
    }

    /// The parameter named `name` (compared without any `r#` prefix).
    pub(crate) fn find(&self, name: &str) -> Option<&Ident> {
        self.names
            .iter()
            .find(|ident| syn::ext::IdentExt::unraw(*ident) == name)
    }

    /// The names for an error message: `` `self`, `order_id`, `amount` ``.
    pub(crate) fn list(&self) -> String {
        let receiver = self.receiver.map(|_| "`self`".to_owned());
        let names = self
            .names
            .iter()
            .map(|ident| format!("`{}`", syn::ext::IdentExt::unraw(ident)));
        let all: Vec<String> = receiver.into_iter().chain(names).collect();
        if all.is_empty() {
            "it has none".to_owned()
        } else {
            format!("its parameters: {}", all.join(", "))
        }
    }
}

fn bound_names(pat: &Pat, names: &mut Vec<Ident>) {
    match pat {
        Pat::Ident(ident) => {
            names.push(ident.ident.clone());
            if let Some((_, sub)) = &ident.subpat {
                bound_names(sub, names);
            }
        }
        Pat::Tuple(tuple) => tuple.elems.iter().for_each(|p| bound_names(p, names)),
        Pat::TupleStruct(tuple) => tuple.elems.iter().for_each(|p| bound_names(p, names)),
        Pat::Struct(strukt) => strukt
            .fields
            .iter()
            .for_each(|field| bound_names(&field.pat, names)),
        Pat::Slice(slice) => slice.elems.iter().for_each(|p| bound_names(p, names)),
        Pat::Reference(reference) => bound_names(&reference.pat, names),
        Pat::Paren(paren) => bound_names(&paren.pat, names),
        Pat::Type(typed) => bound_names(&typed.pat, names),
        // Every alternative binds the same names.
        Pat::Or(or) => {
            if let Some(first) = or.cases.first() {
                bound_names(first, names);
            }
        }
        _ => {}
    }
}
