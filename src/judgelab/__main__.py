from judgelab.cli import app

app()
