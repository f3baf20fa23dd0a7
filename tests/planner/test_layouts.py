"""Pasted layouts (`vibe_rl.planner.layouts`): each is read as "key: value" lines, its old or layout-only parts
dropped, before any prose rule runs."""

from vibe_rl.planner.background import blank_background
from vibe_rl.planner.layouts import read_layouts


def test_a_unified_diff_keeps_its_new_side_only():
    text, notes = read_layouts("Diff:\n--- a.yaml\n+++ b.yaml\n game: nim\n-gpus: 2\n+gpus: 4\n lr: 1e-6\n\nThanks!")
    assert text.split("\n") == ["Diff:", "", "", "game: nim", "", "gpus: 4", "lr: 1e-6", "", "Thanks!"]
    assert notes and "unified diff" in notes[0]


def test_markdown_lists_without_a_diff_header_are_left_alone():
    text, notes = read_layouts("- gpus: 2\n- lr: 1e-6")
    assert (text, notes) == ("- gpus: 2\n- lr: 1e-6", [])


def test_makefile_assignments_are_settings_and_their_references_are_dropped():
    text, notes = read_layouts("LR ?= 2e-6\nNGPU := 4\ntrain:\n\tvibe-rl plan --lr $(LR) --gpus ${NGPU} --game nim")
    assert text.split("\n")[:2] == ["LR=2e-6", "NGPU=4"]
    assert "$(" not in text and "${" not in text and "--game nim" in text
    assert notes


def test_a_tab_separated_header_over_one_row_gives_a_line_a_cell():
    text, _ = read_layouts("run\tgpus\tlr\tnote\nr4\t8\t5e-7\tonly wolves\nthanks")
    assert text.split("\n") == ["run: r4", "gpus: 8", "lr: 5e-7", "note: only wolves", "thanks"]


def test_tab_separated_rows_over_several_rows_become_a_table():
    text, _ = read_layouts("role\tcount\nwerewolf\t3\nseer\t1")
    assert text.split("\n") == ["| role | count |", "|---|---|", "| werewolf | 3 |", "| seer | 1 |"]


def test_latex_is_read_as_plain_text_and_tabular_rows_as_keys():
    text, notes = read_layouts("\\subsection{Setup}\nserver~1 loads \\texttt{/m/q7b}.\n\\begin{tabular}{lc}\n\\toprule\n"
                               "Learning rate & $1\\times10^{-6}$ \\\\\nRoles & a & b \\\\\n\\end{tabular}")
    lines = [line for line in text.split("\n") if line]
    assert lines == ["Setup", "server 1 loads /m/q7b.", "Learning rate: 1e-6", "| Roles | a | b |"]
    assert notes


def test_one_latex_command_is_not_a_latex_document():
    assert read_layouts("the path is \\texttt{x}")[0] == "the path is \\texttt{x}"


def test_the_value_said_instead_of_a_turned_down_one_takes_its_unit():
    text, notes = blank_background("not 8 GPUs, use 4; don't cap at 15 days, 10 is enough; lr not 1e-5 -> 2e-6")
    assert " ".join(text.split()) == "4 GPUs; 10 days; lr 2e-6"
    assert "turned down" in notes[-1]


def test_a_turned_down_value_with_nothing_instead_is_only_blanked():
    text, _ = blank_background("4 GPUs rather than 8, batch 16")
    assert " ".join(text.split()) == "4 GPUs , batch 16"


def test_settings_of_one_prefix_become_one_servers_line():
    from vibe_rl.planner.layouts import read_layouts as read
    text, notes = read('DETECTOR_MODEL = "/m/q3b"   # agent 2\nDETECTOR_GPUS = 2\nNUM_GPUS = 6\nLR = 1e-6')
    assert text.split("\n") == ["detector: /m/q3b, 2 GPUs  # agent 2", "", "NUM_GPUS = 6", "LR = 1e-6"]
    assert notes


def test_a_quoted_earlier_message_is_background_when_the_reply_says_values():
    text, notes = blank_background("> 4 GPUs\n> lr 1e-6\nUse 8 GPUs, lr 5e-7 and batch 32.")
    assert text.split("\n")[2] == "Use 8 GPUs, lr 5e-7 and batch 32." and not text.split("\n")[0].strip()
    assert "quoted earlier message" in notes[0]


def test_a_quoted_message_answered_without_values_is_the_spec():
    text, notes = blank_background("> 4 GPUs\n> lr 1e-6\nLooks good, go ahead.")
    assert text.startswith("> 4 GPUs") and not notes
