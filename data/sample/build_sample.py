"""Build the bundled sample data (data/sample/*.json) from hand-written content.

The content below (personas, context factors, preferences, checklists, the 13
sessions of each persona's journey and their dialogues) was written by hand for
this project. It is NOT benchmark data: it only mirrors the schema and the
construction of the Hugging Face dataset ``kixlab/CUPID`` so that the harness
can be run and tested offline on a tiny model.

Construction (paper Appendix B.3/B.5):

* 8 context factors per persona; the last two are a contrastive pair
  (same factor type, mutually exclusive preferences).
* A journey of 13 sessions. Factor A (the "current factor", one member of the
  pair) takes 4 random positions among the first 12: the first two carry the
  original preference A, the next two a changed preference A' that contradicts
  A. Two other random positions take the contrastive factor B. The remaining 6
  positions take the 6 other factors (one each, in random order). Session 13
  has factor A and holds only its request (the current request).
* Instances (8 prior sessions each, chronological order kept):
    consistent  - drop the 2 A' sessions and the 2 B sessions; truth = A
    contrastive - drop the 2 A' sessions and 2 random "other" sessions; truth = A
    changing    - drop the 2 B sessions and 2 random "other" sessions; truth = A'

The random choices use a fixed, per-persona seed, so running this script
always writes byte-identical files.

Usage:  python data/sample/build_sample.py [--out DIR]   (default: this folder)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from evaluation.data import INSTANCE_TYPES  # noqa: E402

SEED = "cupid-sample-v1"
N_SESSIONS = 13
# Size budget of one instance's prior sessions rendered as text (see prior_text):
# the sample runs on SmolLM2-135M (8,192-token context, ~150 prompt tokens/s on
# 2 cores). Its tokenizer gives 3.2-3.6 characters per token on this text, so
# 5,900 characters keep every instance under ~1,800 tokens.
MAX_PRIOR_CHARS = 5900


def dialogue(*messages: str) -> list[dict]:
    """Messages alternate user/assistant, starting (and ending) with the user."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(messages)
    ]


# ---------------------------------------------------------------------------
# Persona 1: a hydrologist
# ---------------------------------------------------------------------------

PRIYA = {
    "persona_id": "sample-01-priya-raman",
    "description": (
        "Priya Raman, 41, she/her, is a mid-career hydrologist at the Tarn Valley Water Board, "
        "where she models river flows and flood risk for a catchment of small market towns. "
        "She is meticulous and reserved, preferring written exchanges to meetings and "
        "double-checking every number before it leaves her desk. She values security and "
        "achievement: she wants communities protected from floods and her models respected by "
        "academic peers. Since the 2019 Millbrook flood she has been the board's go-to analyst "
        "for explaining risk to the public, a role she finds draining but important. She decides "
        "rationally, weighing evidence methodically, and distrusts advice that skips over "
        "uncertainty. She uses an AI assistant daily for drafting, coding and planning, and "
        "expects it to adapt to whoever or whatever the work involves."
    ),
    "traits": {
        "career_level": "Mid-level",
        "big_five": {"Conscientiousness": "High", "Extraversion": "Low"},
        "values": ["Security", "Achievement"],
        "decision_style": "Rational",
    },
    "factors": [
        {
            "name": "Dr. Hollis Ekwueme",
            "factor_type": "Person/Group",
            "task_types": ["Communicating", "Writing & editing"],
            "preference_type": "Efficiency",
            "preference": "Messages to Dr. Ekwueme must open with the decision he needs to make "
            "and its deadline, then give no more than three supporting figures.",
            "checklist": [
                "Does the response open with the decision the reader needs to make?",
                "Does the response state the deadline for that decision?",
                "Does the response limit the supporting figures to three or fewer?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "HEC-RAS 6.4",
            "factor_type": "Tool/Technology",
            "task_types": ["Problem solving", "Coding & debugging"],
            "preference_type": "Practicality",
            "preference": "Troubleshooting advice for HEC-RAS must give the exact menu path for "
            "each fix and warn which changes would invalidate the model's calibration.",
            "checklist": [
                "Does the response give the exact menu path for each suggested fix?",
                "Does the response warn which changes would invalidate the model's calibration?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Millbrook Residents' Flood Forum",
            "factor_type": "Organization/Institution",
            "task_types": ["Communicating", "Content creating"],
            "preference_type": "Sensitivity",
            "preference": "Material for the Millbrook forum must express flood risk as odds over a "
            "25-year mortgage, avoid terms like 'return period', and acknowledge the 2019 flood.",
            "checklist": [
                "Does the response express flood risk as the chance of flooding over a 25-year mortgage?",
                "Does the response avoid technical terms such as 'return period'?",
                "Does the response acknowledge the 2019 flood?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Harlow Reservoir Sediment Survey",
            "factor_type": "Process/Activity",
            "task_types": ["Planning"],
            "preference_type": "Safety",
            "preference": "Survey plans for Harlow Reservoir must present equipment checks as a "
            "numbered list, with a fallback for each item that could fail afloat.",
            "checklist": [
                "Does the response present the equipment checks as a numbered list?",
                "Does the response give a fallback for each item that could fail?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "gaugeflow Python pipeline",
            "factor_type": "Tool/Technology",
            "task_types": ["Coding & debugging", "Data analysing"],
            "preference_type": "Trustworthiness",
            "preference": "Code changes to the gaugeflow pipeline must use pandas only, never drop "
            "missing timestamps silently, and log how many rows each step alters.",
            "checklist": [
                "Does the response use only pandas, without adding other libraries?",
                "Does the response avoid silently dropping missing timestamps?",
                "Does the response log how many rows each step alters?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Annual Catchment Report",
            "factor_type": "Content/Media",
            "task_types": ["Writing & editing", "Data analysing"],
            "preference_type": "Accuracy",
            "preference": "Text for the Annual Catchment Report must place an uncertainty range "
            "beside every estimate and name the dataset version each figure comes from.",
            "checklist": [
                "Does the response place an uncertainty range beside every estimate?",
                "Does the response name the dataset version each figure comes from?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Professor Ingrid Solberg",
            "factor_type": "Person/Group",
            "task_types": ["Writing & editing", "Reasoning"],
            "preference_type": "Depth",
            "preference": "Drafts for Professor Solberg must list every modelling assumption as a "
            "numbered list before any result, each backed by a literature citation.",
            "checklist": [
                "Does the response list the modelling assumptions before presenting any result?",
                "Does the response present the assumptions as a numbered list?",
                "Does the response back each assumption with a literature citation?",
            ],
            "related_factor": "Councillor Dev Malhotra",
        },
        {
            "name": "Councillor Dev Malhotra",
            "factor_type": "Person/Group",
            "task_types": ["Communicating", "Writing & editing"],
            "preference_type": "Conciseness",
            "preference": "Updates for Councillor Malhotra must give the bottom line first in one "
            "plain sentence and leave modelling assumptions out entirely.",
            "checklist": [
                "Does the response give the bottom line first?",
                "Is the bottom line a single plain-language sentence?",
                "Does the response leave out modelling assumptions?",
            ],
            "related_factor": "Professor Ingrid Solberg",
        },
    ],
    # Which member of the contrastive pair is the current factor A (fixed by the
    # authored sessions; the paper draws it at random).
    "current_factor": "Professor Ingrid Solberg",
    "changed_preference": {
        "preference": "Drafts for Professor Solberg must weave each assumption into the sentence "
        "where it is used, with no separate list, citing only non-standard methods.",
        "checklist": [
            "Does the response weave each assumption into the sentence where it is used?",
            "Does the response avoid a separate list of assumptions?",
            "Does the response limit citations to non-standard methods?",
        ],
    },
    "final_request": "Professor Solberg and I need the results paragraph for our journal paper on "
    "the new flood-wall scenario: the wall lowers the 1-in-100 flood level at Brook Lane by 0.4 m. "
    "Can you draft it?",
    "sessions": {
        # the six "other" factors, one session each
        "Dr. Hollis Ekwueme": [
            dialogue(
                "Dr. Ekwueme needs an update on renewing the Millbrook gauge contract by 14 March. "
                "Costs rose 18%; data gaps fell from 9% to 2%. Can you draft the email?",
                "Hi Hollis, a Millbrook gauge update. Uptime was 97.8% over 412 days, data gaps fell "
                "from 9% to 2%, and it caught both winter peaks. The price rose 18%; renewal is due "
                "14 March.",
                "He stops after the first line, and it doesn't tell him what he has to do.",
                "Hollis, please decide by 14 March whether to renew the Millbrook gauge contract. "
                "Data gaps fell from 9% to 2%, and the price rises 18%.",
                "Perfect. The date is where he'll see it, and three numbers is all he'll take in.",
            )
        ],
        "HEC-RAS 6.4": [
            dialogue(
                "HEC-RAS 6.4 keeps stopping my unsteady Tarn run with 'maximum iterations exceeded' "
                "near cross-section 4.210. How do I fix it?",
                "The solver can't converge at a sharp change in geometry. Try a shorter computation "
                "interval, more iterations, or extra interpolated cross-sections near 4.210.",
                "I know the ideas. I lose half an hour hunting for where each setting lives in 6.4.",
                "Interval: Unsteady Flow Analysis > Computation Settings. Iterations: Options > "
                "Calculation Options and Tolerances. Sections: Geometric Data > Tools > XS "
                "Interpolation; this changes the calibrated geometry, so recalibrate. The first two "
                "are numerical only.",
                "Exactly. Knowing which fix breaks my 2021 calibration saves me a week.",
            )
        ],
        "Millbrook Residents' Flood Forum": [
            dialogue(
                "I'm showing the new flood map to the Millbrook Residents' Flood Forum, set up after "
                "the 2019 flood. Can you write a short intro to the shaded zone?",
                "After the 2019 flood, many of you asked how likely it is to happen again. The "
                "shaded area has a 1% chance of flooding in any given year.",
                "1% sounds tiny to people thinking about all the years they'll be paying for their "
                "house.",
                "After the 2019 flood, many of you asked how likely it is to happen again. For a "
                "home in the shaded area, the chance of flooding at least once over a 25-year "
                "mortgage is more than 1 in 5.",
                "That will land. Glad you kept 2019 in and didn't make them decode 'return periods'.",
            )
        ],
        "Harlow Reservoir Sediment Survey": [
            dialogue(
                "Next week is our Harlow Reservoir sediment survey, two of us on the boat with the "
                "echo sounder. Can you draft the prep plan?",
                "1. Charge the echo sounder and GPS. 2. Check the transducer mount. 3. Load survey "
                "lines onto the GPS. 4. Pack life jackets and radio. 5. Log your launch with the "
                "office.",
                "Last time the GPS died mid-transect and we just sat there. What if kit packs up "
                "on the water?",
                "1. Batteries: carry a charged spare. 2. Transducer mount: spare clamp. 3. GPS: "
                "handheld with lines preloaded. 4. Radio: phone the office. 5. Launch log: office "
                "calls at 13:00 if no check-in.",
                "Great. Numbered so I can tick it off on the jetty, and a plan B for each.",
            )
        ],
        "gaugeflow Python pipeline": [
            dialogue(
                "Our gaugeflow pipeline needs a step resampling 5-minute Tarn levels, held in a "
                "timestamp-indexed pandas DataFrame, to hourly means.",
                "hourly = df['level'].resample('1h').mean().dropna() averages readings per hour and "
                "drops empty hours so later steps don't fail.",
                "That dropna worries me. If a sensor dies for a day, those hours just vanish.",
                "Keep the gaps: hourly = df['level'].resample('1h').mean(), then log.info('%d rows -> "
                "%d hours, %d empty', len(df), len(hourly), hourly.isna().sum()). QC can flag the "
                "NaN hours.",
                "Good. Plain pandas, nothing to install, and the log says what happened to the rows.",
            )
        ],
        "Annual Catchment Report": [
            dialogue(
                "For the Annual Catchment Report, write up: rainfall 1,184 mm ±5% (rain grid v3.1) "
                "and groundwater recharge 210 ±60 mm (recharge model run 7).",
                "In 2024 the Tarn catchment received 1,184 mm of rain (rain grid v3.1), of which "
                "about 210 mm recharged groundwater (recharge model run 7), reflecting a wet autumn.",
                "A board member will quote '210 mm' as if we'd measured it to the millimetre.",
                "In 2024 the Tarn catchment received 1,184 mm ±5% of rain (rain grid v3.1), of "
                "which 210 ±60 mm recharged groundwater (recharge model run 7), reflecting a wet "
                "autumn.",
                "Much better. Every number has its range and still traces to its source version.",
            )
        ],
        # current factor A: two sessions with A, then two with A'
        "A": [
            dialogue(
                "Professor Solberg is co-authoring our Tarn flood model paper. Can you draft the "
                "paragraph reporting our 4% peak-flow error for the 2021 event?",
                "The calibrated model reproduced the 2021 peak within 4%. This assumes constant "
                "roughness (Chow, 1959), a rating curve valid above bankfull (Sauer, 2002), and "
                "negligible reservoir storage (Lee, 2017).",
                "Ingrid reads the assumptions before any number. Here she hits the 4% first.",
                "We assume: 1. roughness stays constant (Chow, 1959); "
                "2. the rating curve holds above bankfull (Sauer, 2002); 3. reservoir storage is "
                "negligible (Lee, 2017). Under these, the model reproduced the 2021 peak within 4%.",
                "That's her style: a numbered list to tick through, each with its reference.",
            ),
            dialogue(
                "Professor Solberg wants a methods note for our abstract on why we moved the "
                "Millbrook floodplain to a 2D model. Can you draft it?",
                "We assume: 1. floodplain flow spreads in ways 1D sections miss (Hunter, 2007); 2. "
                "flow paths change with depth; 3. a 2 m grid resolves the embankments. Hence the 2D "
                "model.",
                "Ingrid will stop at point 2 and ask who says so. Same with point 3.",
                "We assume: 1. floodplain flow spreads in ways 1D sections miss (Hunter, 2007); 2. "
                "flow paths change with depth (Néelz, 2013); 3. a 2 m grid resolves embankments "
                "(Sanders, 2007). Hence the 2D model.",
                "Good. Numbered assumptions up front, and each now has a source behind it.",
            ),
        ],
        "A_changed": [
            dialogue(
                "Professor Solberg is editing our invited commentary. Can you draft the paragraph "
                "on why the Millbrook 1-in-100 flow rose 11% with the 2023 storms added?",
                "Adding the 2023 storms raised the 1-in-100 flow by 11%, assuming stationary "
                "rainfall (Koutsoyiannis, 2006) and calibrated roughness (Chow, 1959). A GEV fit "
                "with a rainfall covariate (Katz, 2013) confirmed the rise.",
                "Ingrid struck most references from the last draft. Nobody needs Chow cited for "
                "roughness, she says.",
                "Adding the 2023 storms raised the 1-in-100 flow by 11%, assuming stationary "
                "rainfall and calibrated roughness. A GEV fit with a rainfall covariate (Katz, "
                "2013), new to this analysis, confirmed the rise.",
                "She'll sign that: assumptions read as part of the argument, not a list to wade "
                "through.",
            ),
            dialogue(
                "Professor Solberg wants a revised abstract paragraph on Harlow Reservoir cutting "
                "downstream peak flows by 14% in the 2023 storms. Can you draft it?",
                "Key assumptions: 1. the spillway rating holds at high heads; 2. no gates were "
                "operated. Under these, Harlow Reservoir cut downstream peak flows by 14% in the "
                "2023 storms.",
                "This opens like the old drafts she kept sending back. She wants assumptions where "
                "they matter.",
                "Harlow Reservoir cut downstream peak flows by 14% in the 2023 storms, judged with a "
                "spillway rating we take as valid at high heads. With no gates operated, the cut "
                "came from storage above the crest.",
                "Yes. Assumptions tucked in where they're used, and no citations for routine "
                "methods.",
            ),
        ],
        # contrastive factor B
        "B": [
            dialogue(
                "Councillor Malhotra asked whether the new Millbrook flood wall changes anything "
                "for the primary school on Brook Lane. Can you draft my reply?",
                "Dear Councillor Malhotra, our modelling assumes the wall meets its design standard "
                "and the Brook Lane culvert stays clear. On that basis the school leaves the "
                "high-risk zone.",
                "He'll read 'assumes' in the first line and phone me for an hour.",
                "Dear Councillor Malhotra, the new wall takes Brook Lane Primary out of the "
                "high-risk flood zone. An extreme flood could still reach it, so its emergency plan "
                "should stay.",
                "Perfect. One plain line up top that he can repeat to parents.",
            ),
            dialogue(
                "Councillor Malhotra needs a budget committee note on our £40k bid for two upper "
                "Tarn rain gauges, which add 45 minutes of flood warning. Can you draft it?",
                "Two rain gauges in the upper Tarn would give Millbrook 45 minutes more flood "
                "warning. Today we rely on radar, which under-reads heavy bursts, and our forecast "
                "assumes uniform rain upstream.",
                "The opening works for him. Everything after it is detail that loses a committee.",
                "Two rain gauges in the upper Tarn would give Millbrook 45 minutes more flood "
                "warning. For £40k, that is time to close roads, move cars and check on vulnerable "
                "residents.",
                "Exactly right. He'll have that first sentence memorised before the meeting.",
            ),
        ],
    },
}

# ---------------------------------------------------------------------------
# Persona 2: a sous-chef
# ---------------------------------------------------------------------------

NOOR = {
    "persona_id": "sample-02-noor-haddad",
    "description": (
        "Noor Haddad, 27, she/her, is a junior sous-chef at Cedar & Salt, a 60-cover Levantine "
        "restaurant in Manchester, where she runs the prep line and writes much of the kitchen's "
        "paperwork. She grew up cooking her grandmother's recipes from Tripoli and dreams of "
        "opening her own place that honours them. Open and curious, she experiments constantly, "
        "yet stays calm during the busiest services. She values self-direction and benevolence, "
        "taking pride in training new staff and treating suppliers fairly. She decides "
        "intuitively, trusting her palate, then writes things down so others can follow. She "
        "uses an AI assistant on her phone between services for menus, emails, training sheets "
        "and social posts."
    ),
    "traits": {
        "career_level": "Entry-level",
        "big_five": {"Openness": "High", "Neuroticism": "Low"},
        "values": ["Self-direction", "Benevolence"],
        "decision_style": "Intuitive",
    },
    "factors": [
        {
            "name": "Chef Marguerite Dubois",
            "factor_type": "Person/Group",
            "task_types": ["Planning", "Writing & editing"],
            "preference_type": "Format",
            "preference": "Prep lists for Chef Dubois must give every quantity in grams, group "
            "tasks by station, and state the time each task must be finished.",
            "checklist": [
                "Does the response give every quantity in grams?",
                "Does the response group tasks by station?",
                "Does the response state the time each task must be finished?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Rational iCombi Pro oven",
            "factor_type": "Tool/Technology",
            "task_types": ["Problem solving", "Information seeking"],
            "preference_type": "Depth",
            "preference": "Programme advice for the iCombi Pro must specify humidity percentage, "
            "temperature and duration for every cooking step, laid out as a table.",
            "checklist": [
                "Does the response specify a humidity percentage for every cooking step?",
                "Does the response give temperature and duration for every cooking step?",
                "Does the response lay out the steps as a table?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Halden Produce",
            "factor_type": "Organization/Institution",
            "task_types": ["Communicating"],
            "preference_type": "Tone",
            "preference": "Emails to Halden Produce must keep a warm, first-name tone while citing "
            "the exact invoice line and credit amount for any quality complaint.",
            "checklist": [
                "Does the response keep a warm, first-name tone?",
                "Does the response cite the exact invoice line being complained about?",
                "Does the response state the credit amount requested?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Allergen Matrix Binder",
            "factor_type": "Object/Artifact",
            "task_types": ["Writing & editing", "Information seeking"],
            "preference_type": "Safety",
            "preference": "Allergen entries for the binder must name the exact ingredient that "
            "carries each allergen and never use vague 'may contain' wording.",
            "checklist": [
                "Does the response name the exact ingredient that carries each allergen?",
                "Does the response avoid vague 'may contain' wording?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Kitchen Porter Onboarding",
            "factor_type": "Process/Activity",
            "task_types": ["Content creating", "Planning"],
            "preference_type": "Clarity",
            "preference": "Onboarding sheets for new kitchen porters must use short imperative "
            "lines, one task per line, with reasons given only for safety steps.",
            "checklist": [
                "Does the response use short imperative lines?",
                "Does the response put one task per line?",
                "Does the response give reasons only for safety steps?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "@noorcooks Instagram account",
            "factor_type": "Content/Media",
            "task_types": ["Content creating"],
            "preference_type": "Morality",
            "preference": "Captions for @noorcooks must credit the grower or producer by name and "
            "avoid hype words such as 'amazing' or 'best'.",
            "checklist": [
                "Does the response credit the grower or producer by name?",
                "Does the response avoid hype words such as 'amazing' or 'best'?",
            ],
            "related_factor": "N/A",
        },
        {
            "name": "Cedar & Salt Tasting Menu Cards",
            "factor_type": "Content/Media",
            "task_types": ["Content creating", "Writing & editing"],
            "preference_type": "Vividness",
            "preference": "Tasting menu card descriptions must tell the dish's origin in two full "
            "sentences, naming the village or family cook it comes from.",
            "checklist": [
                "Does the response describe where the dish comes from?",
                "Is the description written in two full sentences?",
                "Does the response name the village or family cook the dish comes from?",
            ],
            "related_factor": "Cedar & Salt Lunch Specials Board",
        },
        {
            "name": "Cedar & Salt Lunch Specials Board",
            "factor_type": "Content/Media",
            "task_types": ["Content creating"],
            "preference_type": "Conciseness",
            "preference": "Lunch board text must use five words or fewer per dish, listing "
            "ingredients only, with no stories or adjectives.",
            "checklist": [
                "Does the response use five words or fewer per dish?",
                "Does the response list ingredients only?",
                "Does the response avoid stories and adjectives?",
            ],
            "related_factor": "Cedar & Salt Tasting Menu Cards",
        },
    ],
    "current_factor": "Cedar & Salt Tasting Menu Cards",
    "changed_preference": {
        "preference": "Tasting menu card descriptions must be a single evocative line about taste "
        "or texture, leaving out places, people and origin stories.",
        "checklist": [
            "Is the description a single line?",
            "Does the description evoke taste or texture?",
            "Does the description leave out places, people and origin stories?",
        ],
    },
    "final_request": "New course for the Cedar & Salt tasting menu cards: slow-cooked lamb "
    "shoulder with burnt aubergine and pomegranate molasses. Can you write its card description?",
    "sessions": {
        "Chef Marguerite Dubois": [
            dialogue(
                "Chef Dubois wants tomorrow's prep list for 80 covers: hummus, fattoush and lamb "
                "kofta. Can you draft it?",
                "Grill: shape kofta, 4,800 g lamb mince, by 15:00. Cold: blend hummus, 3,000 g "
                "chickpeas and 600 g tahini, by 14:00. Garnish: chop fattoush, 4 heads cos and 2 "
                "bunches radish, by 16:30.",
                "She'll send it back over the fattoush. 'Four heads' means something different every "
                "delivery.",
                "Grill: shape kofta, 4,800 g lamb mince, by 15:00. Cold: blend hummus, 3,000 g "
                "chickpeas and 600 g tahini, by 14:00. Garnish: chop fattoush, 2,400 g cos and "
                "500 g radish, by 16:30.",
                "That's her format exactly: sorted by section, and every job has its deadline.",
            )
        ],
        "Rational iCombi Pro oven": [
            dialogue(
                "I want a programme on our Rational iCombi Pro for 6 kg of chicken thighs for "
                "shawarma. What steps should I use?",
                "| Step | Mode | Temp | Time |\n| 1 | Steam | 75°C | 10 min |\n| 2 | Combi | 160°C "
                "| 18 min |\n| 3 | Dry heat | 230°C | 6 min |\nFinish at 75°C core, then rest 5 minutes.",
                "Combi at what, though? Last time I guessed and the skin came out like rubber.",
                "| Step | Humidity | Temp | Time |\n| 1 | 100% | 75°C | 10 min |\n| 2 | 40% | 160°C "
                "| 18 min |\n| 3 | 0% | 230°C | 6 min |\nFinish at 75°C core, then rest 5 minutes.",
                "Now I can punch it straight in. Heat and time for every step, in a grid I can read "
                "from the pass.",
            )
        ],
        "Halden Produce": [
            dialogue(
                "Need to email Halden Produce: Tuesday's tomatoes were soft. Invoice HP-2291, line "
                "4, 10 kg at £2.10/kg. Can you draft it?",
                "Dear Sir/Madam, I am writing regarding invoice HP-2291. The tomatoes on line 4, "
                "10 kg at £2.10/kg, arrived soft and unusable on Tuesday. We request a credit of "
                "£21.00. Kind regards, Noor Haddad, Cedar & Salt.",
                "Bit stiff. I've known Sam there for years, and this reads like a solicitor's letter.",
                "Hi Sam, hope the week's treating you well! Tuesday's tomatoes on invoice HP-2291, "
                "line 4 (10 kg at £2.10/kg) came in soft, so we couldn't use them. Could you pop a "
                "£21.00 credit on our account? Thanks as always, Noor",
                "Love it. Friendly, and Sam's accounts team can see exactly which line and how much.",
            )
        ],
        "Allergen Matrix Binder": [
            dialogue(
                "Can you write the Allergen Matrix Binder entry for our new pistachio and rose "
                "baklava? Filo, butter, pistachios, rosewater syrup, a little orange blossom.",
                "Pistachio & rose baklava. Contains: gluten, milk, tree nuts. May contain traces of "
                "sesame and peanuts, as it is made in a kitchen that handles them.",
                "An inspector reads 'may contain' as 'we don't actually know'. That binder has to "
                "be certain.",
                "Pistachio & rose baklava. Gluten: wheat in the filo. Milk: butter between the "
                "layers. Tree nuts: pistachios in the filling. Sesame and peanuts: not used in this "
                "recipe and stored apart.",
                "Perfect. Anyone can see which part of the dish carries each allergen.",
            )
        ],
        "Kitchen Porter Onboarding": [
            dialogue(
                "Two new kitchen porters start Monday. Can you write the onboarding sheet for the "
                "dish pit closing routine?",
                "At the end of service, start by emptying and cleaning the dishwasher filters, since "
                "debris affects wash quality. Then descale the machine weekly so it runs "
                "efficiently. Mop the floor with hot water and detergent, and finally switch off "
                "the booster.",
                "These two have ten minutes and wet hands. Nobody's reading paragraphs by the sink.",
                "Empty the dishwasher filters.\nRinse the filters.\nDescale the machine on Fridays.\n"
                "Mop the floor.\nPut out the wet-floor sign: people slip at close.\nSwitch off the "
                "booster: it can scald in the morning.",
                "That's it. A line per job, and the only explanations are where someone could get hurt.",
            )
        ],
        "@noorcooks Instagram account": [
            dialogue(
                "Can you write a caption for @noorcooks? Tonight's special: heritage carrots from "
                "Moss Lane Farm, roasted with za'atar on labneh.",
                "The BEST carrots you'll ever taste! Roasted with za'atar and served on silky "
                "labneh, this amazing special is here tonight only. #foodie #manchestereats",
                "The farm did the real work, and they're nowhere in it.",
                "Heritage carrots grown by Moss Lane Farm, roasted with za'atar and served on silky "
                "labneh. Tonight only. #manchestereats",
                "Much better. It sounds like me now, not a billboard.",
            )
        ],
        "A": [
            dialogue(
                "Can you write the Cedar & Salt tasting menu card description for our kibbeh "
                "nayyeh course? Raw lamb with bulgur, mint and Aleppo pepper.",
                "Kibbeh nayyeh: finely pounded raw lamb with bulgur, fresh mint and a warm kick of "
                "Aleppo pepper, finished with good olive oil.",
                "Lovely words, but tasting menu guests always ask where a dish comes from. This was "
                "Teta Samira's Sunday dish in Zgharta.",
                "Kibbeh nayyeh was Sunday lunch at Teta Samira's table in Zgharta, in the hills "
                "above Tripoli. Ours follows her recipe, with hand-pounded lamb, bulgur, mint and "
                "Aleppo pepper.",
                "That's the one. Two proper sentences, and Teta Samira gets her place on the card.",
            ),
            dialogue(
                "Next card for the Cedar & Salt tasting menu: mujaddara with caramelised onions and "
                "yoghurt. Can you write the description?",
                "Mujaddara has been cooked across the Levant for centuries as a humble dish of "
                "lentils and rice. Ours is crowned with deeply caramelised onions and cool yoghurt.",
                "'Across the Levant' could be anyone's. Ours is my great-aunt Hoda's, from Tripoli.",
                "In great-aunt Hoda's kitchen in Tripoli, mujaddara was stirred slowly until the "
                "onions turned almost black. Ours keeps her lentils, rice and dark onions, finished "
                "with cool yoghurt.",
                "Perfect. A real story, and it still reads as two clean sentences.",
            ),
        ],
        "A_changed": [
            dialogue(
                "Writing the Cedar & Salt tasting menu card for our new course: charred octopus "
                "with freekeh and sumac butter. Can you draft the description?",
                "Charred octopus is a favourite of the fishermen of Batroun, who grill it on the "
                "harbour wall at dusk. Ours sits on smoky freekeh with a glaze of sumac butter.",
                "Our servers tell the backstory at the table now, and it clashes with the card. "
                "Leave the fishermen to them.",
                "Charred octopus on smoky freekeh, with sumac butter melting into every ridge.",
                "Yes, one line that makes you taste it. That's what the cards need now.",
            ),
            dialogue(
                "Cedar & Salt tasting menu card again: dessert is halawet el jibn, sweet cheese "
                "rolls with rose syrup and pistachio. Description, please?",
                "Soft rolls of sweet cheese dough, filled with cream, scented with rose syrup and "
                "scattered with pistachio. A dessert that lingers.",
                "Close, but the card has room for one line now, and that second bit trails off.",
                "Pillowy sweet-cheese rolls, cool cream and rose syrup, with the crunch of pistachio.",
                "Lovely. All texture and flavour, and no history lesson.",
            ),
        ],
        "B": [
            dialogue(
                "Can you write today's lines for the Cedar & Salt lunch specials board? Chicken "
                "shawarma wrap, falafel bowl, and lentil soup with lemon.",
                "Juicy chicken shawarma wrap with garlic toum. Crispy falafel bowl with creamy "
                "tahini. Comforting lentil soup with a squeeze of lemon.",
                "The board gets read from the queue in two seconds. 'Juicy' and 'comforting' just "
                "get in the way.",
                "Chicken shawarma, toum, wrap.\nFalafel, tahini, pickles, rice.\nLentil soup, "
                "lemon, cumin.",
                "Spot on. Short enough to read from the door, and just what's in it.",
            ),
            dialogue(
                "Lunch specials board for Cedar & Salt: lamb kofta with bulgur and yoghurt, and "
                "halloumi with watermelon and mint, my teta's summer favourite. Write them up?",
                "Lamb kofta, bulgur, yoghurt.\nHalloumi salad, Teta's summer favourite, with sweet "
                "watermelon and fresh mint.",
                "The kofta line is right. The halloumi one is telling my family history on a "
                "chalkboard.",
                "Lamb kofta, bulgur, yoghurt.\nHalloumi, watermelon, mint.",
                "Perfect. Three words each, nothing but what's on the plate.",
            ),
        ],
    },
}

PERSONAS = [PRIYA, NOOR]


# ---------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------


def _factor(persona: dict, name: str) -> dict:
    matches = [f for f in persona["factors"] if f["name"] == name]
    if len(matches) != 1:
        raise ValueError(f"{persona['persona_id']}: factor {name!r} defined {len(matches)} times")
    return matches[0]


def check_persona(persona: dict) -> None:
    """Structural checks on the authored content (fail loudly, never silently fix)."""
    pid = persona["persona_id"]
    factors = persona["factors"]
    if len(factors) != 8:
        raise ValueError(f"{pid}: expected 8 context factors, got {len(factors)}")
    a_fac, b_fac = factors[-2], factors[-1]
    if a_fac["related_factor"] != b_fac["name"] or b_fac["related_factor"] != a_fac["name"]:
        raise ValueError(f"{pid}: the last two factors must name each other in related_factor")
    if a_fac["factor_type"] != b_fac["factor_type"]:
        raise ValueError(f"{pid}: the contrastive pair must share a factor type")
    if any(f["related_factor"] != "N/A" for f in factors[:-2]):
        raise ValueError(f"{pid}: only the last two factors may have a related_factor")
    if persona["current_factor"] not in (a_fac["name"], b_fac["name"]):
        raise ValueError(f"{pid}: current factor must be a member of the contrastive pair")
    prefs = [f["preference"] for f in factors] + [persona["changed_preference"]["preference"]]
    checklists = [f["checklist"] for f in factors] + [persona["changed_preference"]["checklist"]]
    for pref in prefs:
        n_words = len(pref.split())
        if not 15 <= n_words <= 25:
            raise ValueError(f"{pid}: preference has {n_words} words (want 15-25): {pref!r}")
    for checklist in checklists:
        if not 2 <= len(checklist) <= 4 or not all(q.endswith("?") for q in checklist):
            raise ValueError(f"{pid}: bad checklist {checklist!r}")
    sessions = persona["sessions"]
    others = [f["name"] for f in factors[:-2]]
    if sorted(k for k in sessions if k not in ("A", "A_changed", "B")) != sorted(others):
        raise ValueError(f"{pid}: need exactly one session list per other factor")
    if [len(sessions[k]) for k in ("A", "A_changed", "B")] != [2, 2, 2]:
        raise ValueError(f"{pid}: need 2 sessions each for A, A' and B")
    for name in others:
        if len(sessions[name]) != 1:
            raise ValueError(f"{pid}: factor {name!r} needs exactly one session")
    for dlg in [d for lst in sessions.values() for d in lst]:
        roles = [m["role"] for m in dlg]
        if not 4 <= len(dlg) <= 6 or roles[0] != "user" or roles[-1] != "user":
            raise ValueError(f"{pid}: dialogue must have 4-6 messages, start and end with the user")


def build_journey(persona: dict, rng: random.Random) -> list[dict]:
    """The 13-session journey: 12 prior sessions (with dialogues) + the final request.

    Each prior session is a dict with keys ``role`` (A, A_changed, B, other),
    ``context_factor``, ``contextual_preference``, ``checklist``, ``dialogue``.
    """
    factors = persona["factors"]
    pair = factors[-2:]
    a_name = persona["current_factor"]
    b_name = next(f["name"] for f in pair if f["name"] != a_name)
    a_fac, b_fac = _factor(persona, a_name), _factor(persona, b_name)
    changed = persona["changed_preference"]
    sessions = persona["sessions"]

    n_prior = N_SESSIONS - 1
    a_positions = sorted(rng.sample(range(n_prior), 4))
    rest = [p for p in range(n_prior) if p not in a_positions]
    b_positions = sorted(rng.sample(rest, 2))
    other_positions = [p for p in rest if p not in b_positions]
    other_names = [f["name"] for f in factors[:-2]]
    rng.shuffle(other_names)

    slots: list[dict | None] = [None] * n_prior
    for i, pos in enumerate(a_positions):
        if i < 2:
            slots[pos] = {"role": "A", "factor": a_fac, "pref": a_fac, "dialogue": sessions["A"][i]}
        else:
            slots[pos] = {
                "role": "A_changed",
                "factor": a_fac,
                "pref": changed,
                "dialogue": sessions["A_changed"][i - 2],
            }
    for i, pos in enumerate(b_positions):
        slots[pos] = {"role": "B", "factor": b_fac, "pref": b_fac, "dialogue": sessions["B"][i]}
    for pos, name in zip(other_positions, other_names):
        fac = _factor(persona, name)
        slots[pos] = {"role": "other", "factor": fac, "pref": fac, "dialogue": sessions[name][0]}

    journey = []
    for slot in slots:
        assert slot is not None
        journey.append(
            {
                "role": slot["role"],
                "context_factor": slot["factor"]["name"],
                "contextual_preference": slot["pref"]["preference"],
                "checklist": slot["pref"]["checklist"],
                "dialogue": slot["dialogue"],
            }
        )
    return journey


def session_record(session: dict) -> dict:
    """The released form of a prior session (no checklist, no role)."""
    return {
        "context_factor": session["context_factor"],
        "contextual_preference": session["contextual_preference"],
        "dialogue": session["dialogue"],
    }


def build_instances(persona: dict) -> tuple[list[dict], list[tuple[dict, set[int]]]]:
    """The journey and the three instances, each with the journey indices it dropped."""
    rng = random.Random(f"{SEED}/{persona['persona_id']}")
    journey = build_journey(persona, rng)
    a_fac = _factor(persona, persona["current_factor"])
    changed = persona["changed_preference"]

    def idx(role: str) -> list[int]:
        return [i for i, s in enumerate(journey) if s["role"] == role]

    a_changed, b, others = idx("A_changed"), idx("B"), idx("other")
    dropped = {
        "consistent": set(a_changed) | set(b),
        "contrastive": set(a_changed) | set(rng.sample(others, 2)),
        "changing": set(b) | set(rng.sample(others, 2)),
    }
    truth = {"consistent": a_fac, "contrastive": a_fac, "changing": changed}

    instances = []
    for itype in INSTANCE_TYPES:
        prior = [session_record(s) for i, s in enumerate(journey) if i not in dropped[itype]]
        if len(prior) != 8:
            raise AssertionError(f"{itype}: {len(prior)} prior sessions")
        instances.append((
            {
                "persona_id": persona["persona_id"],
                "instance_type": itype,
                "current_request": persona["final_request"],
                "current_context_factor": a_fac["name"],
                "current_contextual_preference": truth[itype]["preference"],
                "current_checklist": list(truth[itype]["checklist"]),
                "prior_interactions": prior,
            },
            dropped[itype],
        ))
    return journey, instances


def prior_text(instance: dict) -> str:
    """The prior sessions as the evaluated model sees them, used to measure size.

    Same layout as the harness's session log ("### Session i", "User:" /
    "AI Assistant:" turns separated by blank lines); kept here so that this
    script depends on the standard library only.
    """
    return "\n\n".join(
        f"### Session {i}\n\n"
        + "\n\n".join(
            f"{'User' if m['role'] == 'user' else 'AI Assistant'}: {m['content']}"
            for m in session["dialogue"]
        )
        for i, session in enumerate(instance["prior_interactions"], 1)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    built = []
    for persona in PERSONAS:
        check_persona(persona)
        built.append((persona, *build_instances(persona)))
    for _, _, instances in built:
        for inst, _ in instances:
            n_chars = len(prior_text(inst))
            if n_chars > MAX_PRIOR_CHARS:
                raise ValueError(
                    f"{inst['persona_id']}/{inst['instance_type']}: prior sessions are "
                    f"{n_chars} characters (limit {MAX_PRIOR_CHARS})"
                )

    for persona, journey, instances in built:
        if not args.quiet:
            print(f"{persona['persona_id']}: journey (session: role / factor)")
            for i, s in enumerate(journey, 1):
                print(f"  {i:2d}: {s['role']:<9} {s['context_factor']}")
            print(f"  13: final     {persona['current_factor']} (request only)")
        for inst, dropped in instances:
            n_chars = len(prior_text(inst))
            path = args.out / f"{inst['persona_id']}__{inst['instance_type']}.json"
            path.write_text(json.dumps(inst, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            if not args.quiet:
                kept = [i + 1 for i in range(len(journey)) if i not in dropped]
                print(
                    f"  {inst['instance_type']:<11} sessions {kept}  "
                    f"prior text {n_chars} chars  -> {path.name}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
