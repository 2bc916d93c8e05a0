"""generate/result.py: the record every front receives."""

from clearformer.generate.result import Note, NoteKind, Translation


def test_a_translation_without_notes_is_trusted_and_notes_are_not_repeated():
    plain = Translation("Je t'aime")
    assert plain.trusted and plain.confidence is None and plain.alternatives == ()
    dropped = Note(NoteKind.SENTENCE_DROPPED, "sentence 2 of 2 of the source has no translation")
    noted = plain.noted(dropped).noted(dropped)
    assert not noted.trusted and noted.notes == (dropped,) and str(dropped) == dropped.detail
    assert plain.notes == ()  # records are immutable: noting returns a new one
